"""Severity trajectories per (sample, corruption) and class-conditioned means (docs/spec.md §4,
Fig. 6).

A trajectory is the corrupted-correctness path over severities 1..L (axis -1, in severity order).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "TRAJECTORIES",
    "TrajectorySummary",
    "class_conditioned_mean",
    "trajectory_classes",
    "trajectory_summary",
]

#: Class codes returned by :func:`trajectory_classes`; -1 marks an incomplete trajectory.
TRAJECTORIES: tuple[str, ...] = (
    "always_correct",
    "transient_loss",
    "persistent_loss",
    "always_wrong",
    "transient_correction",
    "persistent_correction",
)


def trajectory_classes(
    clean_correct: np.ndarray, corrupt_correct: np.ndarray, valid: np.ndarray | None = None
) -> np.ndarray:
    """Class code (N, D) for ``clean_correct`` (N,) and ``corrupt_correct`` (N, D, L).

    Persistent loss: wrong at some severity and at every severity after the first wrong one,
    i.e. the path never goes wrong -> correct. Persistent correction mirrors it. A trajectory
    with any invalid pair is -1 (incomplete) and belongs to no class.
    """
    cc = np.asarray(clean_correct, dtype=bool)
    x = np.asarray(corrupt_correct, dtype=bool)
    if x.ndim != 3 or cc.shape != x.shape[:1]:
        raise ValueError(
            f"trajectory_classes: expected clean_correct (N,) and corrupt_correct (N, D, L), "
            f"got {cc.shape} and {x.shape}"
        )
    cc = cc[:, None]
    xt = np.ascontiguousarray(np.moveaxis(x, -1, 0))  # severity-first: fast reductions over L
    any_wrong = ~xt.all(axis=0)
    any_right = xt.any(axis=0)
    recovers = (~xt[:-1] & xt[1:]).any(axis=0)  # a wrong -> correct step
    relapses = (xt[:-1] & ~xt[1:]).any(axis=0)  # a correct -> wrong step
    from_correct = np.where(~any_wrong, 0, np.where(recovers, 1, 2))
    from_wrong = np.where(~any_right, 3, np.where(relapses, 4, 5))
    code = np.where(cc, from_correct, from_wrong)
    if valid is not None:
        code = np.where(np.asarray(valid, dtype=bool).all(axis=-1), code, -1)
    return code.astype(np.int8)


def class_conditioned_mean(classes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Mean of ``values`` (N, D, L) over each trajectory's L pairs, then over the members of
    each class: shape (6,), NaN for an empty class."""
    classes = np.asarray(classes).ravel().astype(np.int64)
    v = np.asarray(values, dtype=np.float64)
    per_traj = (v.reshape(-1, v.shape[-1]) @ np.full(v.shape[-1], 1.0 / v.shape[-1])).ravel()
    ok = classes >= 0
    n_cls = len(TRAJECTORIES)
    count = np.bincount(classes[ok], minlength=n_cls)
    total = np.bincount(classes[ok], weights=per_traj[ok], minlength=n_cls)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1), np.nan)


@dataclass(frozen=True)
class TrajectorySummary:
    """Per class (rows in :data:`TRAJECTORIES` order): member count, share of complete
    trajectories of the same clean source, and class-conditioned mean RAS, dS, dC."""

    count: np.ndarray
    share: np.ndarray
    ras: np.ndarray
    d_s: np.ndarray
    d_c: np.ndarray


def trajectory_summary(
    classes: np.ndarray, ras: np.ndarray, d_s: np.ndarray, d_c: np.ndarray
) -> TrajectorySummary:
    """Fig. 6 row for one model from the class codes (N, D) and per-pair arrays (N, D, L)."""
    c = np.asarray(classes).ravel().astype(np.int64)
    count = np.bincount(c[c >= 0], minlength=len(TRAJECTORIES))
    src = np.array([count[:3].sum()] * 3 + [count[3:].sum()] * 3)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(src > 0, count / np.maximum(src, 1), np.nan)
    return TrajectorySummary(
        count,
        share,
        class_conditioned_mean(classes, ras),
        class_conditioned_mean(classes, d_s),
        class_conditioned_mean(classes, d_c),
    )
