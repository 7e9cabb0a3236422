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
    """RAS = -dC - [dC]+[-dS]+ - [dS]+[-dC]+ (Eq. 11), elementwise; NaN propagates.

    The two penalties are exclusive (they need opposite signs) and each equals |dC dS|, so
    RAS = -dC + min(dC dS, 0): three array operations instead of eight.
    """
    d_s = np.asarray(d_s, dtype=np.float64)
    d_c = np.asarray(d_c, dtype=np.float64)
    return np.minimum(d_c * d_s, 0.0) - d_c


def sign_regime(d_s: np.ndarray, d_c: np.ndarray, eps: float = BOUNDARY_EPS) -> np.ndarray:
    """Regime code (index into :data:`REGIMES`) per pair; -1 where dS or dC is NaN."""
    d_s = np.asarray(d_s, dtype=np.float64)
    d_c = np.asarray(d_c, dtype=np.float64)
    code = (d_c <= 0).astype(np.int8) * 2 + (d_s <= 0)
    code[(np.abs(d_c) < eps) | (np.abs(d_s) < eps)] = 4
    undefined = np.isnan(d_s) | np.isnan(d_c)
    if undefined.any():
        code[undefined] = -1
    return code.astype(np.int8)


@dataclass(frozen=True)
class RegimeTable:
    """Table IV: per regime (rows in :data:`REGIMES` order) the mean dC, dS, RAS and the share
    of valid pairs. Means of an empty regime are NaN."""

    mean_dc: np.ndarray
    mean_ds: np.ndarray
    mean_ras: np.ndarray
    share: np.ndarray
    count: np.ndarray


def regime_table(
    d_s: np.ndarray,
    d_c: np.ndarray,
    eps: float = BOUNDARY_EPS,
    *,
    codes: np.ndarray | None = None,
    ras_values: np.ndarray | None = None,
) -> RegimeTable:
    """Pool all pairs with defined dS and dC into the five sign regimes. ``codes`` and
    ``ras_values`` may be passed when already computed (same shape as ``d_s``)."""
    d_s = np.asarray(d_s, dtype=np.float64).ravel()
    d_c = np.asarray(d_c, dtype=np.float64).ravel()
    code = (sign_regime(d_s, d_c, eps) if codes is None else np.asarray(codes)).ravel()
    r = (ras(d_s, d_c) if ras_values is None else np.asarray(ras_values)).ravel()
    ok = code >= 0
    if not ok.all():
        code, d_s, d_c, r = code[ok], d_s[ok], d_c[ok], r[ok]
    code = code.astype(np.intp)
    n_reg = len(REGIMES)
    count = np.bincount(code, minlength=n_reg)
    with np.errstate(invalid="ignore", divide="ignore"):

        def mean(v: np.ndarray) -> np.ndarray:
            return np.where(
                count > 0, np.bincount(code, weights=v, minlength=n_reg) / count, np.nan
            )

        share = count / count.sum() if count.sum() else np.full(n_reg, np.nan)
        return RegimeTable(mean(d_c), mean(d_s), mean(r), share, count)
