"""Bootstrap over samples (rows) with a fixed seed, for the gates' standard errors and CIs.

Resampling is over samples, never pairs: a sample's 95 conditions move together, so the
standard error reflects the benchmark's real unit of replication. Two styles:

* :func:`bootstrap_se` / :func:`bootstrap_ci` call any ``fn(rows)`` once per replicate;
* :func:`resample_counts` + :func:`weighted_nanmean` give all replicates of a (masked) mean at
  once as a matrix product, which is how the grid's per-cell figures are bootstrapped.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from benchc.spec import DEFAULT_SEED

__all__ = [
    "bootstrap_ci",
    "bootstrap_indices",
    "bootstrap_replicates",
    "bootstrap_se",
    "replicate_se",
    "resample_counts",
    "weighted_nanmean",
]

DEFAULT_N_BOOT = 1000


def _check(n_samples: int, n_boot: int) -> None:
    if n_samples < 1:
        raise ValueError(f"bootstrap: need at least one sample, got n_samples={n_samples}")
    if n_boot < 2:
        raise ValueError(f"bootstrap: need n_boot >= 2, got {n_boot}")


def bootstrap_indices(
    n_samples: int, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """Row indices (n_boot, n_samples) drawn with replacement; same seed, same draws."""
    _check(n_samples, n_boot)
    return np.random.default_rng(seed).integers(0, n_samples, size=(n_boot, n_samples))


def resample_counts(
    n_samples: int, n_boot: int = DEFAULT_N_BOOT, seed: int = DEFAULT_SEED
) -> np.ndarray:
    """How often each sample is drawn in each replicate: float64 (n_boot, n_samples).

    Built from :func:`bootstrap_indices`, so it is the same resampling as :func:`bootstrap_se`
    with the same seed.
    """
    idx = bootstrap_indices(n_samples, n_boot, seed)
    flat = (idx + (np.arange(n_boot) * n_samples)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_boot * n_samples)
    return counts.reshape(n_boot, n_samples).astype(np.float64)


def weighted_nanmean(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Every replicate's mean over samples of ``values`` (N, ...), NaN entries excluded.

    ``counts`` (B, N) from :func:`resample_counts`; returns (B, ...). A replicate in which an
    entry has no non-NaN member gets NaN (undefined), never 0.
    """
    v = np.asarray(values, dtype=np.float64)
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[1] != v.shape[0]:
        raise ValueError(
            f"weighted_nanmean: counts must be (B, {v.shape[0]}) for values {v.shape}, "
            f"got {counts.shape}"
        )
    flat = v.reshape(v.shape[0], -1)
    ok = ~np.isnan(flat)
    num = counts @ np.where(ok, flat, 0.0)
    den = counts @ ok.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
    return out.reshape((counts.shape[0], *v.shape[1:]))


def bootstrap_replicates(
    fn: Callable[[np.ndarray], float | np.ndarray],
    n_samples: int,
    *,
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_BOOT,
) -> np.ndarray:
    """``fn(rows)`` for each replicate's row indices, stacked: (n_boot, *fn's output shape)."""
    idx = bootstrap_indices(n_samples, n_boot, seed)
    return np.stack([np.asarray(fn(rows), dtype=np.float64) for rows in idx])


def bootstrap_se(
    fn: Callable[[np.ndarray], float | np.ndarray],
    n_samples: int,
    *,
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_BOOT,
) -> np.ndarray | float:
    """Bootstrap standard error (ddof=1, NaN replicates ignored) of ``fn`` over resampled rows.

    ``fn`` receives an int array of row indices (with repeats) and returns a scalar or array.
    NaN where fewer than two replicates are defined.
    """
    return replicate_se(bootstrap_replicates(fn, n_samples, seed=seed, n_boot=n_boot))


def replicate_se(reps: np.ndarray) -> np.ndarray | float:
    """Standard error from bootstrap replicates (B, ...): ddof=1 std over axis 0, NaN
    replicates ignored, NaN where fewer than two are defined."""
    ok = (~np.isnan(reps)).sum(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sd = np.nanstd(reps, axis=0, ddof=1)
    out = np.where(ok >= 2, sd, np.nan)
    return float(out) if out.ndim == 0 else out


def bootstrap_ci(
    fn: Callable[[np.ndarray], float | np.ndarray],
    n_samples: int,
    *,
    level: float = 0.95,
    seed: int = DEFAULT_SEED,
    n_boot: int = DEFAULT_N_BOOT,
) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap CI (low, high) of ``fn`` over resampled rows; NaN replicates are
    ignored."""
    if not 0 < level < 1:
        raise ValueError(f"bootstrap_ci: level must be in (0, 1), got {level}")
    reps = bootstrap_replicates(fn, n_samples, seed=seed, n_boot=n_boot)
    a = (1 - level) / 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanquantile(reps, [a, 1 - a], axis=0)
    return lo, hi
