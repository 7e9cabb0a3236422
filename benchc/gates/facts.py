"""What two stored runs say beyond their gates: the facts the verdict (:mod:`benchc.gates.verdict`)
weighs besides the gate records.

Computed from the candidate's stored run and the baseline's (drawn like for like, as the report
draws them): how many samples answer with a letter, the Table II figures' paired differences
(:mod:`benchc.gates.paired`), and how many samples ignore the image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from benchc import spec
from benchc.gates.paired import Difference, differences
from benchc.results.reader import StoredRun

#: Total variation between a sample's clean and corrupted option distributions below which it
#: did not move: a sample below it under every corruption ignores the image.
BLIND_TV = 0.01


@dataclass(frozen=True)
class Facts:
    """What the two runs say beyond the gates (None: not known, e.g. no baseline run)."""

    n: int | None = None
    low_mass: int | None = None
    base_low_mass: tuple[int, int] | None = None
    changes: tuple[Difference, ...] = ()
    blind: float | None = None
    base_blind: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "low_option_mass": self.low_mass,
            "baseline_low_option_mass": list(self.base_low_mass) if self.base_low_mass else None,
            "table2_differences": [d.to_dict() for d in self.changes],
            "image_blind_share": self.blind,
            "baseline_image_blind_share": self.base_blind,
        }


def _probs(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, padded options (NaN) at 0."""
    x = np.where(np.isnan(logits), -np.inf, logits.astype(np.float64))
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def blind_share(run: StoredRun) -> float | None:
    """The share of samples whose option distribution moves by less than :data:`BLIND_TV`
    (total variation) under every corruption and severity; None without a grid."""
    if run.logits is None or run.clean_logits is None or not len(run.ids):
        return None
    p = _probs(run.clean_logits)[:, None, None, :]
    tv = 0.5 * np.abs(_probs(run.logits) - p).sum(axis=-1)  # (N, D, L)
    return float((tv.reshape(len(run.ids), -1).max(axis=1) < BLIND_TV).mean())


def _low_mass(run: StoredRun) -> int | None:
    if run.option_mass is None:
        return None
    return int((run.option_mass < spec.OPTION_MASS_FLAG).sum())


def run_facts(candidate: StoredRun, baseline: StoredRun | None) -> Facts:
    """The facts the verdict reads, from the candidate and the baseline's run as the report
    draws them (like for like: :func:`benchc.report.data.like_for_like`)."""
    changes: tuple[Difference, ...] = ()
    base_mass = None
    base_blind = None
    if baseline is not None:
        diffs = differences(baseline, candidate)
        changes = tuple(diffs.values()) if diffs else ()
        low = _low_mass(baseline)
        base_mass = (low, len(baseline.ids)) if low is not None else None
        base_blind = blind_share(baseline)
    return Facts(
        n=len(candidate.ids),
        low_mass=_low_mass(candidate),
        base_low_mass=base_mass,
        changes=changes,
        blind=blind_share(candidate),
        base_blind=base_blind,
    )


__all__ = ["BLIND_TV", "Facts", "blind_share", "run_facts"]
