"""Power planning: what a recorded baseline's gates can resolve, and how many samples a target
needs (``benchc plan``, docs/guides/gates.md).

From the baseline's own per-sample evidence (its snapshots' sidecars), each gate's minimal
detectable regression (MDR) is computed exactly as a gate run prints it
(:func:`benchc.gates.check.minimal_detectable`, the run's false-alarm budget over the baseline's
gates), and for a target regression, the smallest dataset (drawn like this one) whose MDR is
at most the target: SE_null shrinks as 1/sqrt(n), a share's resolution as 1/n. A target below a
gate's floor cannot be reached by samples (the floor is the rule's: the smallest change that
matters), and says so.

Pure: a baseline folder in, rows out; reading never writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from benchc.gates.baselines import snapshot_files
from benchc.gates.budget import DEFAULT_BUDGET, ErrorBudget
from benchc.gates.check import minimal_detectable, null_se
from benchc.gates.figures import figure
from benchc.gates.payload import Payload
from benchc.gates.snapshot import load_baseline
from benchc.spec import DEFAULT_SEED

#: The largest dataset a plan searches (a target beyond it is "not reachable").
MAX_SCALE = 1e4


class PlanError(ValueError):
    """A folder with no usable snapshot, or a target that names no gate."""


@dataclass(frozen=True)
class PlanRow:
    """One gate's plan. ``needed``: samples for ``target`` (None: no target, or not reachable
    by more samples, ``why``)."""

    level: str
    scope: str
    figure: str
    n: int
    z: float
    floor: float
    se_null: float
    mdr: float
    target: float | None = None
    needed: int | None = None
    why: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def parse_targets(texts: list[str]) -> dict[tuple[str | None, str], float]:
    """``[level:]figure=value`` -> ``{(level or None, figure): value}``."""
    out: dict[tuple[str | None, str], float] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        level, _, name = key.rpartition(":")
        try:
            target = float(value)
        except ValueError:
            target = float("nan")
        if not sep or not name or not (target > 0 and math.isfinite(target)):
            raise PlanError(
                f"--target {text!r}: expected [level:]figure=value with a positive value, "
                "e.g. accuracy=0.02 or model:p_correct=0.01"
            )
        out[(level or None, name)] = target
    return out


def _target(targets: Mapping[tuple[str | None, str], float], level: str, name: str):
    return targets.get((level, name), targets.get((None, name)))


def needed_samples(mdr_at, n: int, target: float, floor: float) -> tuple[int | None, str | None]:
    """The smallest n' whose MDR (``mdr_at(scale)``, scale = n'/n) is at most ``target``."""
    if target < floor:
        return None, f"below the rule's floor {floor:g} (the smallest change that matters)"
    if mdr_at(1.0) <= target:
        return n, None
    if mdr_at(MAX_SCALE) > target:
        return None, f"not reachable with {MAX_SCALE:g} x the samples"
    lo, hi = n, int(n * MAX_SCALE)
    while lo + 1 < hi:  # MDR falls monotonically with n
        mid = (lo + hi) // 2
        if mdr_at(mid / n) <= target:
            hi = mid
        else:
            lo = mid
    return hi, None


def _payloads(folder: Path) -> list[Payload]:
    files = snapshot_files(folder)
    if not files:
        raise PlanError(f"{folder}: no recorded baseline (no case snapshot *.json) in it")
    return [load_baseline(p) for p in files]


def plan(
    folder: Path,
    *,
    targets: Mapping[tuple[str | None, str], float] | None = None,
    alpha: float = DEFAULT_BUDGET,
    seed: int | None = None,
) -> list[PlanRow]:
    """One :class:`PlanRow` per gate of the baseline in ``folder``, in snapshot order."""
    targets = dict(targets or {})
    payloads = _payloads(Path(folder))
    budget = ErrorBudget.for_payloads(alpha, payloads)
    known = {(p.level, r.figure) for p in payloads for r in p.rules}
    for level, name in targets:
        if not any(name == f and level in (None, lv) for lv, f in known):
            raise PlanError(
                f"--target {(level + ':') if level else ''}{name}: no gate of that name in "
                f"{folder} (gated: {sorted({f for _, f in known})})"
            )
    rows = []
    for p in payloads:
        if p.evidence is None:
            continue
        run_seed = seed if seed is not None else int(p.info.get("seed") or DEFAULT_SEED)
        nulls = null_se(p.evidence, seed=run_seed)
        for rule in p.rules:
            if rule.off:
                continue
            spec = figure(p.level, rule.figure)
            z = rule.z if rule.z is not None else budget.z(p.level)
            se = nulls.get(spec.key, float("nan"))

            def mdr_at(scale: float, spec=spec, rule=rule, z=z, se=se, ev=p.evidence) -> float:
                return minimal_detectable(spec, rule, z, se, ev, scale=scale)

            target = _target(targets, p.level, rule.figure)
            needed = why = None
            if target is not None:
                needed, why = needed_samples(mdr_at, len(p.evidence.ids), target, rule.floor)
            rows.append(
                PlanRow(
                    p.level,
                    p.scope,
                    rule.figure,
                    len(p.evidence.ids),
                    z,
                    rule.floor,
                    se,
                    mdr_at(1.0),
                    target,
                    needed,
                    why,
                )
            )
    return rows


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.4g}"


def text_table(rows: list[PlanRow]) -> str:
    """Model-level and VSI gates one line each; family and cell gates one line per figure
    (the largest MDR and the most samples any of them needs: the binding one)."""
    head = ("level", "gate", "n", "z", "floor", "MDR now", "target", "samples needed")
    lines: list[tuple[str, ...]] = []
    groups: dict[tuple[str, str], list[PlanRow]] = {}
    for r in rows:
        key = (r.level, r.figure if r.level in ("cell", "family") else f"{r.figure}@{r.scope}")
        groups.setdefault(key, []).append(r)
    order = {"model": 0, "vsi": 1, "family": 2, "cell": 3}
    for (level, _), group in sorted(
        groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])
    ):
        worst = max(group, key=lambda r: r.mdr if math.isfinite(r.mdr) else math.inf)
        name = worst.figure if len(group) == 1 else f"{worst.figure} (worst of {len(group)})"
        blocked = [r for r in group if r.target is not None and r.needed is None]
        need = (
            blocked[0].why
            if blocked
            else str(max(r.needed for r in group if r.needed is not None))
            if any(r.needed is not None for r in group)
            else "-"
        )
        lines.append(
            (
                level,
                name,
                str(worst.n),
                f"{worst.z:.2f}",
                f"{worst.floor:g}",
                _fmt(worst.mdr),
                _fmt(worst.target),
                need,
            )
        )
    widths = [max(len(x) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*row).rstrip() for row in (head, *lines))


__all__ = ["PlanError", "PlanRow", "needed_samples", "parse_targets", "plan", "text_table"]
