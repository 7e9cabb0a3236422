"""What a threshold snapshot holds, and the one-sided comparison of a run against it.

A payload is plain JSON: the figures with their bootstrap standard errors, the gate rules, and
the per-sample values behind the figures, so a failing gate can name the samples that moved most
without access to the baseline run's results folder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchc.gates.rules import GateRule, parse_rule

#: Bumped when the payload layout changes.
FORMAT = 1
#: Figures are rounded to this many decimals so reruns write byte-identical snapshots.
DECIMALS = 6


def _round(x: float) -> float | None:
    x = float(x)
    return round(x, DECIMALS) if math.isfinite(x) else None


@dataclass(frozen=True)
class Figure:
    """A gated number, its bootstrap SE and the per-sample array that explains it."""

    value: float
    se: float
    per_sample: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": _round(self.value), "se": _round(self.se)}
        if self.per_sample:
            out["per_sample"] = self.per_sample
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Figure:
        def num(v: Any) -> float:
            return float("nan") if v is None else float(v)

        return cls(num(data.get("value")), num(data.get("se")), data.get("per_sample"))


@dataclass(frozen=True)
class Payload:
    """One snapshot: a cell's (or the model's) figures under one set of gate rules."""

    scope: str  # "gaussian_noise-3", "model", "vsi", ...
    model: str
    dataset: str
    n: int
    figures: Mapping[str, Figure]
    rules: Sequence[GateRule]
    ids: Sequence[str] = ()
    per_sample: Mapping[str, Sequence[float]] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        data = {
            "benchc_snapshot": FORMAT,
            "scope": self.scope,
            "model": self.model,
            "dataset": self.dataset,
            "n": int(self.n),
            "rules": [str(r) for r in self.rules],
            "figures": {k: f.to_json() for k, f in sorted(self.figures.items())},
            "info": dict(sorted(self.info.items())),
            "ids": list(self.ids),
            "per_sample": {
                k: [_round(v) for v in np.asarray(vals, dtype=np.float64)]
                for k, vals in sorted(self.per_sample.items())
            },
        }
        return json.dumps(data, indent=1, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str, *, where: str = "snapshot") -> Payload:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or data.get("benchc_snapshot") != FORMAT:
            raise ValueError(f"{where} is not a benchc threshold snapshot (format {FORMAT})")
        return cls(
            scope=data["scope"],
            model=data["model"],
            dataset=data["dataset"],
            n=int(data["n"]),
            figures={k: Figure.from_json(v) for k, v in data["figures"].items()},
            rules=[parse_rule(r) for r in data["rules"]],
            ids=tuple(data.get("ids", ())),
            per_sample={
                k: [float("nan") if v is None else v for v in vals]
                for k, vals in data.get("per_sample", {}).items()
            },
            info=data.get("info", {}),
        )

    def with_rules(self, rules: Sequence[GateRule]) -> Payload:
        """The same figures under other rules (a re-recorded snapshot keeps edited rules)."""
        return Payload(
            self.scope, self.model, self.dataset, self.n, self.figures, tuple(rules),
            self.ids, self.per_sample, self.info,
        )  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """The verdict of one gate; ``status`` is pass, fail, improved or undefined."""

    rule: GateRule
    baseline: Figure
    current: Figure
    tolerance: float
    status: str

    @property
    def change(self) -> float:
        return self.current.value - self.baseline.value


def evaluate(rule: GateRule, baseline: Figure, current: Figure) -> Outcome:
    """One-sided check: only a move in the worse direction beyond the tolerance fails."""
    tol = rule.tolerance(baseline.se, current.se)
    if not (math.isfinite(baseline.value) and math.isfinite(current.value)):
        return Outcome(rule, baseline, current, tol, "undefined")
    better_by = rule.sign * (current.value - baseline.value)
    if better_by < -tol:
        status = "fail"
    elif better_by > tol:
        status = "improved"
    else:
        status = "pass"
    return Outcome(rule, baseline, current, tol, status)


def compare(baseline: Payload, current: Payload) -> list[Outcome]:
    """Evaluate the baseline's rules; a gated figure missing from the run fails."""
    outcomes = []
    for rule in baseline.rules:
        base = baseline.figures.get(rule.figure)
        if base is None:
            continue  # a rule for a figure this scope does not have (e.g. an edited rule list)
        cur = current.figures.get(rule.figure, Figure(float("nan"), float("nan")))
        if not math.isfinite(cur.value) and math.isfinite(base.value):
            outcomes.append(Outcome(rule, base, cur, rule.tolerance(base.se, cur.se), "fail"))
            continue
        outcomes.append(evaluate(rule, base, cur))
    return outcomes


def top_movers(
    baseline: Payload, current: Payload, outcome: Outcome, limit: int = 5
) -> list[tuple[str, float, float]]:
    """``(sample id, baseline value, current value)`` of the samples that moved most in the
    figure's worse direction, matched by sample id."""
    key = outcome.current.per_sample or outcome.baseline.per_sample
    flip = 1
    if key and key.startswith("-"):  # per-sample values move opposite to the figure
        key, flip = key[1:], -1
    if not key or key not in baseline.per_sample or key not in current.per_sample:
        return []
    base = dict(zip(baseline.ids, baseline.per_sample[key], strict=False))
    rows = []
    for sid, cur in zip(current.ids, current.per_sample[key], strict=False):
        b = base.get(sid)
        if b is None or not (math.isfinite(b) and math.isfinite(cur)):
            continue
        worse_by = -flip * outcome.rule.sign * (cur - b)
        if worse_by > 0:
            rows.append((worse_by, sid, b, cur))
    rows.sort(key=lambda r: (-r[0], r[1]))
    return [(sid, b, c) for _, sid, b, c in rows[:limit]]


def describe(outcome: Outcome, baseline: Payload, current: Payload) -> list[str]:
    """The failure text SPEC section 6 asks for: figure, cell, baseline, current, tolerance,
    and the samples that contributed most."""
    r, b, c = outcome.rule, outcome.baseline, outcome.current
    combined = math.hypot(
        b.se if math.isfinite(b.se) else 0.0, c.se if math.isfinite(c.se) else 0.0
    )
    lines = [
        f"gate {outcome.status.upper()}: {r.figure} in {current.scope} "
        f"(model {current.model}, dataset {current.dataset}, n={current.n})",
        f"  baseline {b.value:.4f} (SE {b.se:.4f})  current {c.value:.4f} (SE {c.se:.4f})  "
        f"change {outcome.change:+.4f}, {r.direction} is better",
        f"  tolerance {outcome.tolerance:.4f} = max(floor {r.floor:g}, "
        f"z {r.z:g} x combined SE {combined:.4f})   rule '{r}'",
    ]
    movers = top_movers(baseline, current, outcome)
    if movers:
        key = (c.per_sample or b.per_sample or "").lstrip("-")
        lines.append(f"  samples that moved most ({key}, baseline -> current):")
        lines.extend(f"    {sid}: {bv:.3f} -> {cv:.3f}" for sid, bv, cv in movers)
    return lines


def report(baseline: Payload, current: Payload) -> list[str]:
    """Text for every failed gate, then one line per improvement (never a failure)."""
    outcomes = compare(baseline, current)
    lines: list[str] = []
    for o in outcomes:
        if o.status == "fail":
            lines.extend(describe(o, baseline, current))
    improved = [o for o in outcomes if o.status == "improved"]
    for o in improved:
        lines.append(
            f"improved (not a failure): {o.rule.figure} in {current.scope} "
            f"{o.baseline.value:.4f} -> {o.current.value:.4f}; --snapshot-update records it"
        )
    return lines
