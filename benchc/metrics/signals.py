"""Selective-prediction and calibration signals of the VSI paper (appendix): AUROC with error as
the positive class, PRR@80, within-cell z-score hybrids, ECE, Brier, Spearman with a
permutation test and a bootstrap percentile CI.

Convention: a *risk score* is higher where an error is more likely (e.g. ``-VSI``,
``-max_prob``); every function here takes risk scores.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchc.metrics.stats import bootstrap_indices
from benchc.spec import DEFAULT_SEED

__all__ = [
    "SpearmanResult",
    "auroc_error",
    "auroc_vsi",
    "brier",
    "ece",
    "prr",
    "prr_rows",
    "spearman_bootstrap_ci",
    "spearman_permutation",
    "zscore_hybrid",
]


def _vec(x: np.ndarray, name: str, n: int | None = None) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 1 or (n is not None and a.shape[0] != n):
        want = f"({n},)" if n is not None else "(N,)"
        raise ValueError(f"{name}: expected shape {want}, got {a.shape}")
    bad = np.nonzero(~np.isfinite(a))[0]
    if bad.size:
        raise ValueError(f"{name}[{int(bad[0])}]: value is {float(a[bad[0]])}, must be finite")
    return a


def _binary(x: np.ndarray, name: str = "errors") -> np.ndarray:
    e = np.asarray(x)
    if e.ndim != 1:
        raise ValueError(f"{name}: expected shape (N,), got {e.shape}")
    if e.dtype != bool:
        bad = np.nonzero((e != 0) & (e != 1))[0]
        if bad.size:
            raise ValueError(
                f"{name}[{int(bad[0])}]: must be 0/1 or bool, got {e[bad[0]].item()!r}"
            )
    return e.astype(bool)


def auroc_error(errors: np.ndarray, risk: np.ndarray) -> float:
    """AUROC of ``risk`` for detecting errors (error = positive); NaN with one class only."""
    e = _binary(errors)
    r = _vec(risk, "risk", e.shape[0])
    if e.all() or not e.any():
        return float("nan")
    from sklearn.metrics import roc_auc_score  # here: scikit-learn costs a run's start 1.3 s

    return float(roc_auc_score(e, r))


def auroc_vsi(errors: np.ndarray, vsi: np.ndarray) -> float:
    """AUROC_VSI: error positive, score -VSI (low sensitivity predicts error)."""
    return auroc_error(errors, -_vec(vsi, "vsi"))


def prr(errors: np.ndarray, risk: np.ndarray, coverage: float = 0.8) -> float:
    """Prediction-rejection ratio at ``coverage``: keep round(coverage N) predictions, rejecting
    the riskiest (among equal risks the lower index is rejected first), and compare the risk
    reduction with an oracle's that rejects errors first. 1 = oracle, 0 = random, < 0 worse.
    NaN when the oracle gains nothing (no errors, or nothing rejected)."""
    e = _binary(errors)
    r = _vec(risk, "risk", e.shape[0])
    if not 0 < coverage <= 1:
        raise ValueError(f"prr: coverage must be in (0, 1], got {coverage}")
    if not e.size:
        return float("nan")
    return float(prr_rows(e[None], r[None], coverage)[0])


def prr_rows(errors: np.ndarray, risk: np.ndarray, coverage: float = 0.8) -> np.ndarray:
    """:func:`prr` of each row of ``errors``/``risk`` (B, N) at once (bootstrap replicates),
    unvalidated: the one definition :func:`prr` also runs."""
    e = np.asarray(errors, dtype=bool)
    r = np.asarray(risk, dtype=np.float64)
    n = e.shape[1]
    n_keep = int(np.floor(coverage * n + 0.5))  # round half up
    keep = np.argsort(-r, axis=1, kind="stable")[:, n - n_keep :]
    base = e.mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        risk_signal = np.take_along_axis(e, keep, axis=1).mean(axis=1)
        oracle = np.maximum(e.sum(axis=1) - (n - n_keep), 0) / n_keep
        gain = base - oracle
        return np.where(gain > 0, (base - risk_signal) / gain, np.nan)


def zscore_hybrid(signals: np.ndarray, cells: np.ndarray | None = None) -> np.ndarray:
    """Equal-weight sum of within-cell z-scores of each component: ``signals`` (M, N) risk
    scores, ``cells`` (N,) labels (default: one cell). A component that is constant within a
    cell has no z-score there, so the hybrid is NaN for that cell."""
    s = np.asarray(signals, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"signals: expected (M components, N samples), got shape {s.shape}")
    for m in range(s.shape[0]):
        _vec(s[m], f"signals[{m}]")
    labels = np.zeros(s.shape[1], dtype=np.int64) if cells is None else np.asarray(cells)
    if labels.shape != (s.shape[1],):
        raise ValueError(f"cells: expected shape ({s.shape[1]},), got {labels.shape}")
    _, inv = np.unique(labels, return_inverse=True)
    count = np.bincount(inv)
    mean = np.stack([np.bincount(inv, weights=row) for row in s]) / count
    centered = s - mean[:, inv]
    std = np.sqrt(np.stack([np.bincount(inv, weights=row**2) for row in centered]) / count)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(std[:, inv] > 0, centered / std[:, inv], np.nan)
    return z.sum(axis=0)


def _conf_correct(confidence: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = _vec(confidence, "confidence")
    bad = np.nonzero((c < 0) | (c > 1))[0]
    if bad.size:
        raise ValueError(f"confidence[{int(bad[0])}]: {float(c[bad[0]])} is outside [0, 1]")
    y = _binary(correct, "correct")
    if y.shape != c.shape:
        raise ValueError(f"correct: expected shape {c.shape}, got {y.shape}")
    return c, y.astype(np.float64)


def ece(confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10) -> float:
    """Expected calibration error over ``n_bins`` equal-width bins on [0, 1] (1.0 falls in the
    last bin): sum_b n_b / N |acc_b - conf_b|. NaN for no samples."""
    c, y = _conf_correct(confidence, correct)
    if not c.size:
        return float("nan")
    b = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
    acc_sum = np.bincount(b, weights=y, minlength=n_bins)
    conf_sum = np.bincount(b, weights=c, minlength=n_bins)
    gap = np.abs(acc_sum - conf_sum)  # n_b |acc_b - conf_b|
    return float(gap.sum() / c.size)


def brier(confidence: np.ndarray, correct: np.ndarray) -> float:
    """Mean squared error between stated confidence and binary correctness."""
    c, y = _conf_correct(confidence, correct)
    return float(np.mean((c - y) ** 2)) if c.size else float("nan")


@dataclass(frozen=True)
class SpearmanResult:
    rho: float
    p_value: float


def spearman_permutation(
    a: np.ndarray,
    b: np.ndarray,
    n_resamples: int = 9999,
    seed: int = DEFAULT_SEED,
    batch: int | None = None,
) -> SpearmanResult:
    """Spearman rho (scipy.stats.spearmanr) with a two-sided permutation p-value
    (scipy.stats.permutation_test, pairings shuffled, fixed seed). ``batch`` caps the
    permutations held in memory at once (None: all), so 10^5 shuffles of 1000 samples need
    8 MB per 1000, not 800 MB."""
    from scipy import stats  # here: scipy.stats costs a run's start 0.7 s

    x = _vec(a, "a")
    y = _vec(b, "b", x.shape[0])
    if x.shape[0] < 3:
        raise ValueError(f"spearman: need at least 3 paired values, got {x.shape[0]}")
    rho = float(stats.spearmanr(x, y).statistic)
    if np.isnan(rho):
        return SpearmanResult(float("nan"), float("nan"))
    rx, ry = stats.rankdata(x), stats.rankdata(y)
    rx = (rx - rx.mean()) / np.linalg.norm(rx - rx.mean())
    ry = (ry - ry.mean()) / np.linalg.norm(ry - ry.mean())

    def stat(u: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.sum(u * ry, axis=axis)

    res = stats.permutation_test(
        (rx,),
        stat,
        permutation_type="pairings",
        n_resamples=n_resamples,
        vectorized=True,
        alternative="two-sided",
        batch=batch,
        rng=np.random.default_rng(seed),
    )
    return SpearmanResult(rho, float(res.pvalue))


def _row_ranks(codes: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank) of ``codes[idx]`` within each row:
    each row's keys are offset past the previous row's, so one sort ranks every row."""
    b, n = idx.shape
    offset = (int(codes.max()) + 1) * np.arange(b, dtype=np.int64)[:, None]
    keys = codes[idx] + offset
    flat = np.sort(keys, axis=None)
    left = np.searchsorted(flat, keys, "left")
    right = np.searchsorted(flat, keys, "right")
    return (left + right + 1) / 2 - n * np.arange(b)[:, None]


def spearman_bootstrap_ci(
    a: np.ndarray,
    b: np.ndarray,
    n_boot: int = 1000,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile bootstrap CI of Spearman rho over resampled pairs
    (:func:`benchc.metrics.stats.bootstrap_indices` rows, so the same seed draws the same
    resamples), all replicates ranked at once. A replicate whose ranks are constant has no rho
    and is left out; NaN bounds when none has one."""
    x = _vec(a, "a")
    y = _vec(b, "b", x.shape[0])
    if x.shape[0] < 3:
        raise ValueError(f"spearman: need at least 3 paired values, got {x.shape[0]}")
    if not 0 < level < 1:
        raise ValueError(f"spearman_bootstrap_ci: level must be in (0, 1), got {level}")
    idx = bootstrap_indices(x.shape[0], n_boot, seed)
    rx = _row_ranks(np.unique(x, return_inverse=True)[1], idx)
    ry = _row_ranks(np.unique(y, return_inverse=True)[1], idx)
    rx -= rx.mean(axis=1, keepdims=True)
    ry -= ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(den > 0, (rx * ry).sum(axis=1) / den, np.nan)
    rho = rho[np.isfinite(rho)]
    if not rho.size:
        return float("nan"), float("nan")
    tail = 100 * (1 - level) / 2
    lo, hi = np.percentile(rho, [tail, 100 - tail])
    return float(lo), float(hi)
