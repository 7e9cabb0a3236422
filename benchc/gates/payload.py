"""What a threshold snapshot holds: a reviewable JSON and a pickle-free array sidecar.

The JSON (one per case, ``thresholds/<model>/<case>.json``) carries what a reviewer reads and
edits: the case's figures (value, bootstrap SE, minimal detectable regression), the gate rules
and the settings the figures were measured under. The per-sample arrays a paired gate recomputes
the figures from (:mod:`benchc.gates.evidence`) live in ``arrays/<digest>.npz`` next to it,
named by their content digest: cases with equal evidence share one file, a damaged file is
recognised, and a subset re-record that rewrites some cases never touches the arrays that the
other cases still reference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchc.gates.evidence import Evidence
from benchc.gates.figures import LEVELS, Level
from benchc.gates.rules import GateRule, parse_rule

#: Bumped when the payload layout changes (1: unpaired SEs and per-sample lists in the JSON).
FORMAT = 2
#: Figures are rounded to this many decimals so reruns write byte-identical snapshots.
DECIMALS = 6


def _round(x: float | None) -> float | None:
    if x is None:
        return None
    x = float(x)
    return round(x, DECIMALS) if math.isfinite(x) else None


def _num(v: Any) -> float:
    return float("nan") if v is None else float(v)


@dataclass(frozen=True)
class Figure:
    """A figure's value, its (unpaired) bootstrap SE and its minimal detectable regression."""

    value: float
    se: float = float("nan")
    mdr: float = float("nan")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": _round(self.value), "se": _round(self.se)}
        if math.isfinite(self.mdr):
            out["mdr"] = _round(self.mdr)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Figure:
        return cls(_num(data.get("value")), _num(data.get("se")), _num(data.get("mdr")))


@dataclass(frozen=True)
class Payload:
    """One case: a cell's, a family's, the model's or the VSI set's figures under one set of
    gate rules, with the evidence behind them.

    ``evidence`` is in memory for a payload built from a run; ``evidence_file`` names the
    sidecar of a payload read from disk (the gate loads it through :mod:`benchc.gates.sidecar`).
    """

    scope: str  # "gaussian_noise-3", "noise", "model", "vsi"
    level: Level
    model: str
    dataset: str
    n: int
    figures: Mapping[str, Figure]
    rules: Sequence[GateRule]
    info: Mapping[str, Any] = field(default_factory=dict)
    evidence: Evidence | None = None
    evidence_file: str | None = None
    evidence_digest: str | None = None

    def __post_init__(self) -> None:
        if self.level not in LEVELS:
            raise ValueError(f"payload level {self.level!r} is not one of {LEVELS}")

    @property
    def digest(self) -> str | None:
        return self.evidence.digest if self.evidence is not None else self.evidence_digest

    def to_json(self, evidence_file: str | None = None) -> str:
        data: dict[str, Any] = {
            "benchc_snapshot": FORMAT,
            "level": self.level,
            "scope": self.scope,
            "model": self.model,
            "dataset": self.dataset,
            "n": int(self.n),
            "rules": [str(r) for r in self.rules],
            "figures": {k: f.to_json() for k, f in self.figures.items()},
            "info": dict(sorted(self.info.items())),
        }
        file = evidence_file or self.evidence_file
        if self.digest is not None:
            data["evidence"] = {"file": file, "sha256": self.digest}
        return json.dumps(data, indent=1, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes, *, where: str = "snapshot") -> Payload:
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{where} is not valid JSON: {exc}") from exc
        if not isinstance(data, dict) or "benchc_snapshot" not in data:
            raise ValueError(f"{where} is not a benchc threshold snapshot")
        if data["benchc_snapshot"] != FORMAT:
            raise ValueError(
                f"{where} has snapshot format {data['benchc_snapshot']}, this benchc reads "
                f"format {FORMAT} (paired gates need the per-sample sidecar): re-record it"
            )
        try:
            ev = data.get("evidence") or {}
            return cls(
                scope=data["scope"],
                level=data["level"],
                model=data["model"],
                dataset=data["dataset"],
                n=int(data["n"]),
                figures={k: Figure.from_json(v) for k, v in data["figures"].items()},
                rules=tuple(parse_rule(r) for r in data["rules"]),
                info=data.get("info", {}),
                evidence_file=ev.get("file"),
                evidence_digest=ev.get("sha256"),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"{where}: missing or malformed field {exc}") from exc

    def with_rules(self, rules: Sequence[GateRule]) -> Payload:
        """The same figures under other rules."""
        return replace(self, rules=tuple(rules))

    def with_evidence(self, evidence: Evidence) -> Payload:
        """This payload with its evidence attached (e.g. loaded from the sidecar)."""
        return replace(self, evidence=evidence)
