"""The Robustness Alignment Score (Eq. 11) and its sign regimes (supplementary Table IV)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchc.spec import BOUNDARY_EPS

__all__ = [
    "REGIMES",
    "RegimeTable",
    "ras",
    "regime_table",
    "sign_regime",
]

#: Regime codes returned by :func:`sign_regime`, in Table IV row order.
REGIMES: tuple[str, ...] = (
    "worse_flatter",  # dC > 0, dS > 0
    "worse_sharper",  # dC > 0, dS < 0 (overconfident degradation)
    "better_flatter",  # dC < 0, dS > 0 (hesitant support)
    "better_sharper",  # dC < 0, dS < 0 (supported improvement)
    "boundary",  # |dC| < eps or |dS| < eps
)


def ras(d_s: np.ndarray, d_c: np.ndarray) -> np.ndarray:
    """RAS = -dC - [dC]+[-dS]+ - [dS]+[-dC]+ (Eq. 11), elementwise; NaN propagates."""
    d_s = np.asarray(d_s, dtype=np.float64)
    d_c = np.asarray(d_c, dtype=np.float64)
    pos_c, neg_c = np.maximum(d_c, 0.0), np.maximum(-d_c, 0.0)
    pos_s, neg_s = np.maximum(d_s, 0.0), np.maximum(-d_s, 0.0)
    return -d_c - pos_c * neg_s - pos_s * neg_c


def sign_regime(d_s: np.ndarray, d_c: np.ndarray, eps: float = BOUNDARY_EPS) -> np.ndarray:
    """Regime code (index into :data:`REGIMES`) per pair; -1 where dS or dC is NaN."""
    d_s = np.asarray(d_s, dtype=np.float64)
    d_c = np.asarray(d_c, dtype=np.float64)
    code = np.where(d_c > 0, 0, 2) + np.where(d_s > 0, 0, 1)
    code = np.where((np.abs(d_c) < eps) | (np.abs(d_s) < eps), 4, code)
    return np.where(np.isnan(d_s) | np.isnan(d_c), -1, code).astype(np.int8)


@dataclass(frozen=True)
class RegimeTable:
    """Table IV: per regime (rows in :data:`REGIMES` order) the mean dC, dS, RAS and the share
    of valid pairs. Means of an empty regime are NaN."""

    mean_dc: np.ndarray
    mean_ds: np.ndarray
    mean_ras: np.ndarray
    share: np.ndarray
    count: np.ndarray


def regime_table(d_s: np.ndarray, d_c: np.ndarray, eps: float = BOUNDARY_EPS) -> RegimeTable:
    """Pool all pairs with defined dS and dC into the five sign regimes."""
    d_s = np.asarray(d_s, dtype=np.float64).ravel()
    d_c = np.asarray(d_c, dtype=np.float64).ravel()
    code = sign_regime(d_s, d_c, eps).astype(np.int64)
    ok = code >= 0
    code, d_s, d_c = code[ok], d_s[ok], d_c[ok]
    r = ras(d_s, d_c)
    n_reg = len(REGIMES)
    count = np.bincount(code, minlength=n_reg)
    with np.errstate(invalid="ignore", divide="ignore"):

        def mean(v: np.ndarray) -> np.ndarray:
            return np.where(
                count > 0, np.bincount(code, weights=v, minlength=n_reg) / count, np.nan
            )

        share = count / count.sum() if count.sum() else np.full(n_reg, np.nan)
        return RegimeTable(mean(d_c), mean(d_s), mean(r), share, count)
