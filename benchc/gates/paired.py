"""Paired differences of two stored runs: candidate − baseline per Table II figure, ± the paired
bootstrap SE over the same samples, and whether it is significant.

The same resampling the gates use (:mod:`benchc.gates.check`): both sides on the cells they
share, aligned by sample id, the same resampled ids applied to both, the SE of the difference
over those replicates. ``benchc compare`` and the run's verdict (:mod:`benchc.gates.verdict`:
large changes no gate covers) read these numbers, so the two cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchc.gates.evidence import EvidenceError, stored_grid
from benchc.metrics.figures import FigureDef, table2_figures
from benchc.metrics.stats import replicate_se, resample_counts
from benchc.results.reader import StoredRun

#: Bootstrap replicates of a paired difference (the gates' own number).
N_BOOT = 1000
#: |difference| / paired SE at or above which a difference is called significant (two-sided,
#: about 95 % under a normal approximation).
SIGNIFICANT_Z = 2.0


@dataclass(frozen=True)
class Difference:
    """One figure's paired difference, candidate − baseline."""

    figure: FigureDef
    baseline: float
    current: float
    se: float
    n: int

    @property
    def diff(self) -> float:
        return self.current - self.baseline

    @property
    def z(self) -> float:
        """|difference| in paired SEs (inf: a change with no spread; NaN: undefined)."""
        if not (math.isfinite(self.diff) and math.isfinite(self.se)):
            return float("nan")
        if self.se == 0:
            return float("inf") if self.diff != 0 else 0.0
        return abs(self.diff) / self.se

    @property
    def significant(self) -> bool:
        return math.isfinite(self.diff) and self.z >= SIGNIFICANT_Z

    @property
    def worse_by(self) -> float:
        """How far the figure moved in its worse direction (negative: it improved)."""
        sign = 1 if self.figure.direction == "higher" else -1
        return -sign * self.diff

    def to_dict(self) -> dict[str, Any]:
        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "figure": self.figure.name,
            "key": self.figure.key,
            "label": self.figure.label,
            "direction": self.figure.direction,
            "baseline": num(self.baseline),
            "current": num(self.current),
            "diff": num(self.diff),
            "se": num(self.se),
            "z": None if math.isnan(self.z) else (None if math.isinf(self.z) else self.z),
            "significant": self.significant,
            "worse": bool(math.isfinite(self.diff) and self.worse_by > 0),
            "n": self.n,
        }


def differences(
    baseline: StoredRun, candidate: StoredRun, *, seed: int | None = None, n_boot: int = N_BOOT
) -> dict[str, Difference] | None:
    """Every Table II figure's paired difference of ``candidate`` against ``baseline`` on the
    cells both have and the samples both hold (by id); None when they share no cell or no
    sample (then nothing can be paired)."""
    b, c = stored_grid(baseline), stored_grid(candidate)
    if b is None or c is None:
        return None
    keys = [k for k in b.conditions if k in set(c.conditions)]
    mine = set(c.ids)
    rows = np.array([i for i, sid in enumerate(b.ids) if sid in mine], dtype=np.int64)
    if not keys or rows.size == 0:
        return None
    try:
        b = b.restrict(keys).take(rows)
        c = c.restrict(keys).align(b.ids)
    except EvidenceError:
        return None
    n = len(b.ids)
    w = resample_counts(n, n_boot, baseline.seed if seed is None else seed)
    fb, fc = b.figures(), c.figures()
    rb, rc = b.replicates(w), c.replicates(w)
    out = {}
    for fig in table2_figures():
        se = float(replicate_se(rc[fig.name] - rb[fig.name]))
        out[fig.name] = Difference(fig, float(fb[fig.name]), float(fc[fig.name]), se, n)
    return out


__all__ = ["N_BOOT", "SIGNIFICANT_Z", "Difference", "differences"]
