"""VSI Table 3 for one (model, dataset) cell: how well each risk signal ranks the model's errors
(AUROC, PRR@80) with bootstrap confidence intervals, and the calibration of its max-prob
(ECE, Brier, a reliability table) (docs/spec.md §5).

The bootstrap follows the VSI paper (App. D.1: B = 1000, seed 42, percentile 95 % intervals);
AUROC and PRR are computed for every replicate at once (rank sums and a stable sort along the
replicate axis), so a report stays fast at the paper's B.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from benchc.metrics.signals import auroc_error, prr, prr_rows
from benchc.spec import VSI_PAPER_N_BOOT, VSI_PAPER_SEED

__all__ = [
    "SignalScore",
    "auroc_replicates",
    "reliability",
    "signal_table",
]


@dataclass(frozen=True)
class SignalScore:
    """One signal's AUROC and PRR@coverage, each with its percentile 95 % interval."""

    auroc: float
    auroc_ci: tuple[float, float]
    prr: float
    prr_ci: tuple[float, float]


def auroc_replicates(errors: np.ndarray, risk: np.ndarray) -> np.ndarray:
    """AUROC (error = positive) of each row of ``errors``/``risk`` (B, N): the Mann-Whitney rank
    sum with average ranks for ties; NaN for a row with one class only."""
    from scipy.stats import rankdata  # here: scipy.stats costs a run's start 0.7 s

    e = np.asarray(errors, dtype=bool)
    r = rankdata(np.asarray(risk, dtype=np.float64), axis=1)
    n_pos = e.sum(axis=1)
    n_neg = e.shape[1] - n_pos
    u = (r * e).sum(axis=1) - n_pos * (n_pos + 1) / 2.0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((n_pos > 0) & (n_neg > 0), u / (n_pos * n_neg), np.nan)


def _ci(values: np.ndarray) -> tuple[float, float]:
    v = values[np.isfinite(values)]
    if not v.size:
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(v, [2.5, 97.5])
    return (float(lo), float(hi))


def signal_table(
    errors: np.ndarray,
    risks: Mapping[str, np.ndarray],
    *,
    coverage: float = 0.8,
    n_boot: int = VSI_PAPER_N_BOOT,
    seed: int = VSI_PAPER_SEED,
) -> dict[str, SignalScore]:
    """AUROC and PRR@``coverage`` of every risk signal (higher = more likely wrong), with
    intervals from one shared set of ``n_boot`` resamples of the samples (so the signals'
    intervals are paired). Point values are :func:`~benchc.metrics.signals.auroc_error` and
    :func:`~benchc.metrics.signals.prr` on the full sample."""
    e = np.asarray(errors, dtype=bool)
    n = e.shape[0]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    out = {}
    for name, risk in risks.items():
        r = np.asarray(risk, dtype=np.float64)
        if r.shape != (n,):
            raise ValueError(f"risk {name!r}: expected shape ({n},), got {r.shape}")
        out[name] = SignalScore(
            auroc_error(e, r),
            _ci(auroc_replicates(e[idx], r[idx])),
            prr(e, r, coverage),
            _ci(prr_rows(e[idx], r[idx], coverage)),
        )
    return out


def reliability(
    confidence: np.ndarray, correct: np.ndarray, n_bins: int = 10
) -> dict[str, list[float | int | None]]:
    """The reliability diagram's table (the bins of :func:`benchc.metrics.signals.ece`): per
    equal-width bin its count, mean confidence and accuracy (None for an empty bin)."""
    c = np.asarray(confidence, dtype=np.float64)
    y = np.asarray(correct, dtype=np.float64)
    b = np.minimum((c * n_bins).astype(np.int64), n_bins - 1)
    count = np.bincount(b, minlength=n_bins)
    conf = np.bincount(b, weights=c, minlength=n_bins)
    acc = np.bincount(b, weights=y, minlength=n_bins)

    def mean(s: np.ndarray) -> list[float | None]:
        return [float(s[i] / count[i]) if count[i] else None for i in range(n_bins)]

    return {
        "edges": [i / n_bins for i in range(n_bins + 1)],
        "count": [int(x) for x in count],
        "confidence": mean(conf),
        "accuracy": mean(acc),
    }
