"""Correctness-state attribution (Eqs. 12-16) and the Mixed-cell rate (Table II).

States are indexed in the order ``STATES = ("cc", "cw", "wc", "ww")``: first letter clean
correctness, second corrupted correctness. All functions reduce over axis 0 (samples) and keep
whatever trailing shape the values have, so one call covers a whole (D, L) grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchc.spec import BOUNDARY_EPS

__all__ = [
    "STATES",
    "StateAttribution",
    "attribute",
    "mixed_cell_rate",
    "mixed_cells",
    "state_attribution",
    "state_codes",
]

STATES: tuple[str, ...] = ("cc", "cw", "wc", "ww")


def state_codes(clean_correct: np.ndarray, corrupt_correct: np.ndarray) -> np.ndarray:
    """State index per pair: 0 cc, 1 cw, 2 wc, 3 ww. ``clean_correct`` (N,) is broadcast over
    the trailing axes of ``corrupt_correct`` (N, ...)."""
    cc = np.asarray(clean_correct, dtype=bool)
    xc = np.asarray(corrupt_correct, dtype=bool)
    cc = cc.reshape(cc.shape + (1,) * (xc.ndim - cc.ndim))
    return (2 * (~cc) + (~xc)).astype(np.int8)


@dataclass(frozen=True)
class StateAttribution:
    """Eqs. 12-16 for one quantity M over a trailing shape T (e.g. (D, L)).

    ``count`` (4, *T): |Q_ab|; ``mean`` (4, *T): M_ab (Eq. 13); ``alpha`` (4, *T): alpha_ab
    (Eq. 14, row a's share of source a); ``pi`` (2, *T): pi_c, pi_w (Eq. 14);
    ``source`` (2, *T): M_c, M_w (Eq. 15); ``aggregate`` (*T): M (Eq. 16); ``total`` (4, *T):
    the sum of M over each state (for pooling cells exactly).
    Means over empty sets are NaN; an empty state inside a non-empty source has alpha = 0 and
    drops out of Eq. 15 rather than poisoning it.
    """

    count: np.ndarray
    mean: np.ndarray
    alpha: np.ndarray
    pi: np.ndarray
    source: np.ndarray
    aggregate: np.ndarray
    total: np.ndarray

    @property
    def share(self) -> np.ndarray:
        """Table III "Share": |Q_ab| / |Q| per cell (4, *T); NaN for a cell with no pairs."""
        n = self.count.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, self.count / np.maximum(n, 1), np.nan)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def state_attribution(
    clean_correct: np.ndarray,
    corrupt_correct: np.ndarray,
    values: np.ndarray,
    valid: np.ndarray | None = None,
) -> StateAttribution:
    """State-conditioned means, weights and aggregates of ``values`` (N, ...) per trailing cell.

    ``clean_correct`` (N,), ``corrupt_correct`` and ``values`` (N, ...). ``valid`` (N, ...)
    excludes pairs (e.g. unparseable black-box pairs); pairs whose value is NaN are excluded too.
    """
    values = np.asarray(values, dtype=np.float64)
    cc = np.asarray(clean_correct, dtype=bool)
    xc = np.asarray(corrupt_correct, dtype=bool)
    n = values.shape[0] if values.ndim else 0
    if cc.shape != (n,) or xc.shape != values.shape:
        raise ValueError(
            f"state_attribution: expected clean_correct (N,) and corrupt_correct, values (N, ...); "
            f"got {cc.shape}, {xc.shape}, {values.shape}"
        )
    trail = values.shape[1:]
    v = values.reshape(n, -1)
    ok = ~np.isnan(v)
    if valid is not None:
        ok &= np.asarray(valid, dtype=bool).reshape(n, -1)
    v0 = np.where(ok, v, 0.0)
    right = xc.reshape(n, -1) & ok
    wrong = ~xc.reshape(n, -1) & ok
    # Rows = clean source (c, w); a (2, N) @ (N, cells) product sums each source per cell.
    src = np.stack([cc, ~cc]).astype(np.float64)
    to_right = src @ right.astype(np.float64)
    to_wrong = src @ wrong.astype(np.float64)
    count = np.stack([to_right[0], to_wrong[0], to_right[1], to_wrong[1]])
    sum_right = src @ np.where(right, v0, 0.0)
    sum_wrong = src @ np.where(wrong, v0, 0.0)
    total = np.stack([sum_right[0], sum_wrong[0], sum_right[1], sum_wrong[1]])
    count = count.astype(np.int64).reshape((4, *trail))
    total = total.reshape((4, *trail))
    return StateAttribution(count, *attribute(count, total), total)


def attribute(
    count: np.ndarray, total: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Eqs. 13-16 from a four-state table: ``count`` and ``total`` (4, *T) (cc, cw, wc, ww)
    -> ``mean``, ``alpha``, ``pi``, ``source`` (Eq. 15) and ``aggregate`` (Eq. 16)."""
    trail = count.shape[1:]
    mean = _safe_div(total, count)
    src_count = count.reshape((2, 2, *trail)).sum(axis=1)
    alpha = _safe_div(count, np.repeat(src_count, 2, axis=0))
    n_all = src_count.sum(axis=0)
    pi = _safe_div(src_count, n_all[None])
    # Eq. 15 with empty states dropped: alpha_ab = 0 there, and 0 * NaN must not poison M_a.
    contrib = np.where(count > 0, alpha * np.where(count > 0, mean, 0.0), 0.0)
    source = contrib.reshape((2, 2, *trail)).sum(axis=1)
    source = np.where(src_count > 0, source, np.nan)
    aggregate = np.where(src_count > 0, pi * np.where(src_count > 0, source, 0.0), 0.0).sum(axis=0)
    aggregate = np.where(n_all > 0, aggregate, np.nan)
    return mean, alpha, pi, source, aggregate


def mixed_cells(r_c: np.ndarray, r_w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mixed, both defined) per cell: R_c < 0 and R_w > 0 where both are defined; a cell R
    within ``BOUNDARY_EPS`` of 0 has no sign (float32 noise, as the sign regimes' boundary),
    so it is not mixed (docs/spec.md §4)."""
    r_c = np.asarray(r_c, dtype=np.float64)
    r_w = np.asarray(r_w, dtype=np.float64)
    both = ~np.isnan(r_c) & ~np.isnan(r_w)
    with np.errstate(invalid="ignore"):
        mixed = (r_c < -BOUNDARY_EPS) & (r_w > BOUNDARY_EPS) & both
    return mixed, both


def mixed_cell_rate(r_c: np.ndarray, r_w: np.ndarray) -> float:
    """100 x share of cells with R_c < 0 and R_w > 0 (each beyond ``BOUNDARY_EPS``), over cells
    where both are defined (docs/spec.md §4); NaN when no cell has both."""
    mixed, both = mixed_cells(r_c, r_w)
    n = int(both.sum())
    if n == 0:
        return float("nan")
    return 100.0 * float(mixed.sum()) / n
