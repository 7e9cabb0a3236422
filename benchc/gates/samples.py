"""Per-sample verdicts (``--per-sample``): each sample of a cell judged against its own noise.

A sample's figure (its pair's RAS: :func:`benchc.gates.figures.figures` at the ``sample``
level) moves under any benign change, and by how much differs from sample to sample: a
confident sample barely moves, a near-tie flips its answer and with it the sign of its
alignment. So, as each aggregate gate's MDR does, a sample's tolerance comes from the benign
reference (:meth:`benchc.gates.evidence.Evidence.benign`, the same logit noise): its *own* null
spread, the RMS change of its value over ``N_NULL`` benign re-measurements of the baseline, times
the z of its share of the run's false-alarm budget (the ``sample`` level of
:class:`benchc.gates.budget.ErrorBudget`), floored by the level's default floor.

A sample benign noise can flip is too noisy to judge: the flip probability of its clean or
corrupted top-2 margin under that noise exceeds its per-sample false-alarm rate (a rare flip is
invisible in a few re-measurements but certain among ten thousand samples), or its tolerance
exceeds the room the figure has left. Such a sample says so (``unchecked``) instead of failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtr

from benchc.gates.evidence import BENIGN_LOGIT_SD, GridEvidence
from benchc.gates.figures import FigureSpec, figures

#: Benign re-measurements behind each sample's null spread.
N_NULL = 20


@dataclass(frozen=True)
class SampleVerdict:
    """One sample's verdict in one cell. ``status``: pass, fail, improved or unchecked."""

    sample: str
    status: str
    baseline: float
    current: float
    tolerance: float
    null_sd: float
    z: float
    reason: str | None = None

    def describe(self, spec: FigureSpec) -> str:
        """One line: what moved, how far, and where the tolerance came from."""
        return (
            f"{spec.label} {self.baseline:.3f} -> {self.current:.3f} "
            f"({spec.direction} is better), beyond tolerance {self.tolerance:.3f} = "
            f"max(floor {spec.floor:g}, z {self.z:.2f} x the sample's benign null SD "
            f"{self.null_sd:.4f})"
        )


def _margins(ev: GridEvidence) -> np.ndarray:
    """(N, conditions) top-1 minus top-2 option logit (inf with a single option)."""
    x = np.where(np.isnan(ev.logits), -np.inf, ev.logits.astype(np.float64))
    top2 = np.sort(x, axis=2)[..., -2:]
    return top2[..., 1] - top2[..., 0]


def sample_verdicts(
    base: GridEvidence, cur: GridEvidence, *, z: float, seed: int = 0, n_null: int = N_NULL
) -> dict[str, SampleVerdict]:
    """Every sample of a one-cell ``base`` (the cell snapshot's evidence) against ``cur``."""
    (spec,) = figures("sample", gated_only=True)
    cur = cur.align(base.ids)
    b, c = base.per_sample(spec.per_sample), cur.per_sample(spec.per_sample)  # type: ignore[arg-type]
    null = np.stack([base.benign(seed + r).per_sample(spec.per_sample) for r in range(n_null)])  # type: ignore[arg-type]
    with np.errstate(invalid="ignore"):
        null_sd = np.sqrt(np.nanmean((null - b) ** 2, axis=0))
    # a benign flip of the clean or the corrupted answer: N(0, 2 SD^2) beats the margin
    # ndtr(-x) is scipy.stats.norm.sf(x) bit for bit (without importing scipy.stats)
    p_flip = ndtr(-_margins(base) / (BENIGN_LOGIT_SD * math.sqrt(2))).max(axis=1)
    alpha = float(ndtr(-z))
    out = {}
    for i, sid in enumerate(base.ids):
        tol = max(spec.floor, z * float(null_sd[i])) if np.isfinite(null_sd[i]) else math.nan
        common = dict(baseline=float(b[i]), current=float(c[i]), tolerance=tol,
                      null_sd=float(null_sd[i]), z=z)  # fmt: skip
        room = spec.room(float(b[i]))
        if not np.isfinite(b[i]) or not np.isfinite(tol):
            status, why = "unchecked", f"{spec.name} is undefined for this sample"
        elif p_flip[i] > alpha or tol >= room:
            status = "unchecked"
            why = (
                f"too noisy to judge: benign noise flips its answer with p={p_flip[i]:.2g} "
                f"(its false-alarm share {alpha:.2g})"
                if p_flip[i] > alpha
                else f"too noisy to judge: tolerance {tol:.3f} >= room {room:.3f}"
            )
        elif not np.isfinite(c[i]):
            status, why = "fail", f"{spec.name} became undefined"
        else:
            worse = -spec.sign * (c[i] - b[i])
            status = "fail" if worse > tol else "improved" if -worse > tol else "pass"
            why = None
        out[sid] = SampleVerdict(sid, status, reason=why, **common)  # type: ignore[arg-type]
    return out


__all__ = ["N_NULL", "SampleVerdict", "sample_verdicts"]
