"""Every Bench-C figure of one model on one (sample x corruption x severity) grid, in one call.

Layout: ``logits_clean`` (N, K_max) and ``logits_corrupt`` (N, D, L, K_max), NaN-padded for
samples with fewer options; or the stacked store layout ``logits`` (N, 1 + D*L, K_max) with the
clean condition first and the corrupted ones in (corruption, severity) order, which is
:func:`benchc.spec.all_conditions` order when D = 19 and L = 5.

Cell-level and model-level accuracy figures are *paired*: over the valid pairs of the cell (or
grid), comparing each pair with its own sample's clean prediction. With every pair valid this is
the plain Table II definition.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from benchc import spec
from benchc.metrics.options import (
    alignment_from_top,
    entropy_option_first,
    probs_option_first,
    to_option_first,
    top_option_first,
    validate_answers,
    validate_option_logits,
)
from benchc.metrics.ras import RegimeTable, ras, regime_table, sign_regime
from benchc.metrics.states import StateAttribution, mixed_cell_rate, state_attribution
from benchc.metrics.stats import DEFAULT_N_BOOT, replicate_se, resample_counts
from benchc.metrics.trajectories import TrajectorySummary, trajectory_classes, trajectory_summary

__all__ = [
    "CELL_FIGURES",
    "MODEL_FIGURES",
    "GridMetrics",
    "compute_grid",
    "grid_from_logits",
    "split_conditions",
]

#: Model-level figures (floats on :class:`GridMetrics`) that the bootstrap resamples.
MODEL_FIGURES: tuple[str, ...] = (
    "acc_clean",
    "acc_corrupt",
    "d_acc",
    "consistency",
    "rel_robustness",
    "ras",
    "r_c",
    "r_w",
    "mixed_cell_rate",
)
#: Cell-level figures ((D, L) arrays named ``cell_<figure>``) that the bootstrap resamples.
CELL_FIGURES: tuple[str, ...] = (
    "acc",
    "d_acc",
    "consistency",
    "rel_robustness",
    "ras",
    "r_c",
    "r_w",
    "d_s",
    "d_c",
)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _freeze(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class GridMetrics:
    """All Bench-C figures of one model. Arrays are read-only.

    Per sample (N,): ``n_options``, ``answers``, ``pred_clean``, ``correct_clean``, ``s_clean``,
    ``c_clean``, ``conf_clean``; ``p_clean`` (N, K_max) float32 (padding 0).
    Per pair (N, D, L): ``p_corrupt`` (N, D, L, K_max) float32 (NaN on invalid pairs),
    ``pred`` (-1 on invalid pairs), ``correct``,
    ``consistent``, ``d_s``, ``d_c``, ``ras`` (NaN on invalid pairs), ``regime``
    (:data:`benchc.metrics.ras.REGIMES` code, -1 invalid), ``valid``.
    Per cell (D, L): ``cell_n``, ``cell_acc``, ``cell_d_acc``, ``cell_consistency``,
    ``cell_rel_robustness``, ``cell_ras``, ``cell_r_c``, ``cell_r_w``, ``cell_d_s``,
    ``cell_d_c``; ``cell_state_count`` / ``cell_alpha`` (4, D, L) in cc, cw, wc, ww order;
    ``cell_pi`` (2, D, L) for sources c, w.
    Model level (float): see :data:`MODEL_FIGURES`, plus ``d_s`` and ``d_c``.
    """

    corruptions: tuple[str, ...]
    severities: tuple[int, ...]
    n_options: np.ndarray
    answers: np.ndarray
    p_clean: np.ndarray
    pred_clean: np.ndarray
    correct_clean: np.ndarray
    s_clean: np.ndarray
    c_clean: np.ndarray
    conf_clean: np.ndarray
    p_corrupt: np.ndarray
    pred: np.ndarray
    correct: np.ndarray
    consistent: np.ndarray
    d_s: np.ndarray
    d_c: np.ndarray
    ras: np.ndarray
    regime: np.ndarray
    valid: np.ndarray
    cell_n: np.ndarray
    cell_acc: np.ndarray
    cell_d_acc: np.ndarray
    cell_consistency: np.ndarray
    cell_rel_robustness: np.ndarray
    cell_ras: np.ndarray
    cell_r_c: np.ndarray
    cell_r_w: np.ndarray
    cell_d_s: np.ndarray
    cell_d_c: np.ndarray
    cell_state_count: np.ndarray
    cell_alpha: np.ndarray
    cell_pi: np.ndarray
    acc_clean: float
    acc_corrupt: float
    d_acc: float
    consistency: float
    rel_robustness: float
    ras_mean: float
    r_c: float
    r_w: float
    mixed_cell_rate: float
    d_s_mean: float
    d_c_mean: float

    @property
    def shape(self) -> tuple[int, int, int]:
        """(N, D, L)."""
        return self.valid.shape  # type: ignore[return-value]

    def model_figures(self) -> dict[str, float]:
        """The :data:`MODEL_FIGURES` as a dict (``ras`` is the mean per-pair RAS)."""
        out = {f: getattr(self, f) for f in MODEL_FIGURES if f != "ras"}
        out["ras"] = self.ras_mean
        return {f: out[f] for f in MODEL_FIGURES}

    def cell_figures(self) -> dict[str, np.ndarray]:
        """The :data:`CELL_FIGURES` as (D, L) arrays."""
        return {f: getattr(self, f"cell_{f}") for f in CELL_FIGURES}

    def trajectory_classes(self) -> np.ndarray:
        """(N, D) trajectory class codes (:data:`benchc.metrics.trajectories.TRAJECTORIES`)."""
        return trajectory_classes(self.correct_clean, self.correct, self.valid)

    def trajectories(self) -> TrajectorySummary:
        """Fig. 6 composition and class-conditioned RAS / dS / dC."""
        return trajectory_summary(self.trajectory_classes(), self.ras, self.d_s, self.d_c)

    def regimes(self) -> RegimeTable:
        """Table IV over this grid's valid pairs."""
        return regime_table(self.d_s, self.d_c, codes=self.regime, ras_values=self.ras)

    def states(self, quantity: str = "ras") -> StateAttribution:
        """Table III: Eqs. 12-16 pooled over every valid pair, for ``ras``, ``d_s`` or ``d_c``."""
        if quantity not in ("ras", "d_s", "d_c"):
            raise ValueError(f"states: quantity must be 'ras', 'd_s' or 'd_c', got {quantity!r}")
        cc = np.broadcast_to(self.correct_clean[:, None, None], self.valid.shape).reshape(-1)
        values = getattr(self, quantity).reshape(-1)
        return state_attribution(cc, self.correct.reshape(-1), values, self.valid.reshape(-1))

    def pair_values(self, figure: str) -> np.ndarray:
        """Per-pair contributions (N, D, L) to a mean figure, NaN where a pair does not count:
        the cell figure is their mean over samples, so a gate can name the samples that moved
        it most. ``figure`` in acc, d_acc, consistency, ras, r_c, r_w, d_s, d_c."""
        ok = self.valid
        cc = np.broadcast_to(self.correct_clean[:, None, None], ok.shape)
        nan = np.float64(np.nan)
        table = {
            "acc": lambda: np.where(ok, self.correct, nan),
            "d_acc": lambda: np.where(ok, self.correct.astype(float) - cc, nan),
            "consistency": lambda: np.where(ok, self.consistent, nan),
            "ras": lambda: self.ras.copy(),
            "r_c": lambda: np.where(cc, self.ras, nan),
            "r_w": lambda: np.where(cc, nan, self.ras),
            "d_s": lambda: self.d_s.copy(),
            "d_c": lambda: self.d_c.copy(),
        }
        if figure not in table:
            raise ValueError(f"pair_values: no per-pair form for {figure!r}; one of {list(table)}")
        return table[figure]().astype(np.float64)

    def bootstrap(
        self,
        n_boot: int = DEFAULT_N_BOOT,
        seed: int = spec.DEFAULT_SEED,
        *,
        counts: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """Bootstrap replicates over samples of every model figure (B,) and cell figure
        ``cell_<name>`` (B, D, L), all from one resampling (same seed, same rows).

        ``counts`` (B, N) replaces the seeded resampling: a paired comparison passes the same
        counts for two grids over the same samples (:func:`benchc.metrics.stats.resample_counts`).
        """
        n, n_d, n_l = self.valid.shape
        w = resample_counts(n, n_boot, seed) if counts is None else np.asarray(counts, float)
        if w.ndim != 2 or w.shape[1] != n:
            raise ValueError(f"bootstrap: counts must be (B, {n}), got {w.shape}")
        n_boot = w.shape[0]
        v = self.valid.reshape(n, -1).astype(np.float64)
        cc = self.correct_clean.astype(np.float64)[:, None]
        ok = self.valid.reshape(n, -1)

        def sums(x: np.ndarray) -> np.ndarray:
            return w @ np.where(ok, x.reshape(n, -1), 0.0)

        n_cell = w @ v
        clean_c = w @ (v * cc)
        corr_c = sums(self.correct.astype(np.float64))
        cons = sums(self.consistent.astype(np.float64))
        ras_s = sums(self.ras)
        src_c = v * cc
        src_w = v * (1 - cc)
        rc_num = w @ (np.where(ok, self.ras.reshape(n, -1), 0.0) * cc)
        rc_den = w @ src_c
        rw_num = w @ (np.where(ok, self.ras.reshape(n, -1), 0.0) * (1 - cc))
        rw_den = w @ src_w
        out: dict[str, np.ndarray] = {}
        cell = {
            "acc": _ratio(corr_c, n_cell),
            "d_acc": _ratio(corr_c - clean_c, n_cell),
            "consistency": _ratio(cons, n_cell),
            "rel_robustness": _ratio(corr_c, clean_c),
            "ras": _ratio(ras_s, n_cell),
            "r_c": _ratio(rc_num, rc_den),
            "r_w": _ratio(rw_num, rw_den),
            "d_s": _ratio(sums(self.d_s), n_cell),
            "d_c": _ratio(sums(self.d_c), n_cell),
        }
        for k, a in cell.items():
            out[f"cell_{k}"] = a.reshape(n_boot, n_d, n_l)
        tot = n_cell.sum(axis=1)
        both = ~np.isnan(cell["r_c"]) & ~np.isnan(cell["r_w"])
        mixed = _ratio(
            100.0 * ((cell["r_c"] < 0) & (cell["r_w"] > 0) & both).sum(axis=1), both.sum(axis=1)
        )
        out.update(
            acc_clean=_ratio(w @ self.correct_clean.astype(np.float64), w.sum(axis=1)),
            acc_corrupt=_ratio(corr_c.sum(axis=1), tot),
            d_acc=_ratio((corr_c - clean_c).sum(axis=1), tot),
            consistency=_ratio(cons.sum(axis=1), tot),
            rel_robustness=_ratio(corr_c.sum(axis=1), clean_c.sum(axis=1)),
            ras=_ratio(ras_s.sum(axis=1), tot),
            r_c=_ratio(rc_num.sum(axis=1), rc_den.sum(axis=1)),
            r_w=_ratio(rw_num.sum(axis=1), rw_den.sum(axis=1)),
            mixed_cell_rate=mixed,
        )
        return out

    def standard_errors(
        self, n_boot: int = DEFAULT_N_BOOT, seed: int = spec.DEFAULT_SEED
    ) -> dict[str, np.ndarray | float]:
        """Bootstrap standard error (ddof=1, undefined replicates ignored) of every figure that
        :meth:`bootstrap` resamples; NaN where fewer than two replicates are defined."""
        return {k: replicate_se(v) for k, v in self.bootstrap(n_boot, seed).items()}


def split_conditions(
    logits: np.ndarray, n_severities: int = len(spec.SEVERITIES)
) -> tuple[np.ndarray, np.ndarray]:
    """(N, 1 + D*L, K) -> clean (N, K) and corrupted (N, D, L, K) views, clean first."""
    logits = np.asarray(logits)
    if logits.ndim != 3:
        raise ValueError(f"logits: expected (N, 1 + D*L, K_max), got shape {logits.shape}")
    n, c, k = logits.shape
    if n_severities < 1 or c < 2 or (c - 1) % n_severities:
        raise ValueError(
            f"logits: condition axis has {c} entries; expected 1 clean + D*{n_severities} corrupted"
        )
    return logits[:, 0], logits[:, 1:].reshape(n, (c - 1) // n_severities, n_severities, k)


def grid_from_logits(
    logits: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray | None = None,
    *,
    n_severities: int = len(spec.SEVERITIES),
    valid: np.ndarray | None = None,
    corruptions: tuple[str, ...] | None = None,
) -> GridMetrics:
    """:func:`compute_grid` on the stored layout (N, 1 + D*L, K_max), clean condition first."""
    clean, corrupt = split_conditions(logits, n_severities)
    return compute_grid(clean, corrupt, answers, n_options, valid=valid, corruptions=corruptions)


def compute_grid(
    logits_clean: np.ndarray,
    logits_corrupt: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray | None = None,
    *,
    valid: np.ndarray | None = None,
    corruptions: tuple[str, ...] | None = None,
) -> GridMetrics:
    """Compute every Bench-C figure (docs/spec.md §4) for one model.

    ``logits_clean`` (N, K_max), ``logits_corrupt`` (N, D, L, K_max) NaN-padded option logits;
    ``answers`` (N,) int; ``n_options`` (N,) int or None to read K from the padding; ``valid``
    (N, D, L) bool marks usable corrupted pairs (default all; invalid pairs may hold NaN logits
    and are excluded everywhere). ``corruptions`` names the D axis (default the 19 names of
    docs/spec.md §1 when D = 19). Raises ``ValueError`` naming the offending index on bad input.
    """
    lc = np.asarray(logits_clean)
    lx = np.asarray(logits_corrupt)
    if lc.ndim != 2:
        raise ValueError(f"logits_clean: expected (N, K_max), got shape {lc.shape}")
    if lx.ndim != 4 or lx.shape[0] != lc.shape[0] or lx.shape[-1] != lc.shape[-1]:
        raise ValueError(
            f"logits_corrupt: expected (N, D, L, K_max) = ({lc.shape[0]}, D, L, {lc.shape[1]}), "
            f"got shape {lx.shape}"
        )
    n, d, n_sev, _ = lx.shape
    if n == 0 or d == 0 or n_sev == 0:
        raise ValueError(f"logits_corrupt: empty grid of shape {lx.shape}")
    if valid is None:
        valid_arr = np.ones((n, d, n_sev), dtype=bool)
    else:
        valid_arr = np.asarray(valid, dtype=bool)
        if valid_arr.shape != (n, d, n_sev):
            raise ValueError(f"valid: expected shape {(n, d, n_sev)}, got {valid_arr.shape}")
    k = validate_option_logits(lc, n_options, name="logits_clean")
    validate_option_logits(
        lx, k, name="logits_corrupt", skip=~valid_arr if valid is not None else None
    )
    y = validate_answers(answers, k)
    if corruptions is None:
        corruptions = (
            spec.CORRUPTIONS if d == len(spec.CORRUPTIONS) else tuple(f"c{i}" for i in range(d))
        )
    if len(corruptions) != d:
        raise ValueError(f"corruptions: {len(corruptions)} names for D={d} corruptions")
    severities = tuple(range(1, n_sev + 1))

    p0t = probs_option_first(to_option_first(lc), k)
    if valid is not None:  # invalid pairs may hold anything: neutralise, then mark undefined
        lx = np.where(valid_arr[..., None], lx, 0.0)
    pxt = probs_option_first(to_option_first(lx), k)
    if valid is not None:
        pxt[:, ~valid_arr] = np.nan
    pred0, conf0 = top_option_first(p0t)
    correct0 = pred0 == y
    s0 = entropy_option_first(p0t, k).astype(np.float64)
    c0 = alignment_from_top(pred0, conf0, y).astype(np.float64)
    pred, conf = top_option_first(pxt)
    if valid is not None:
        pred[~valid_arr] = -1
    correct = (pred == y[:, None, None]) & valid_arr
    consistent = (pred == pred0[:, None, None]) & valid_arr
    d_s = entropy_option_first(pxt, k) - s0[:, None, None]
    d_c = alignment_from_top(pred, conf, y) - c0[:, None, None]
    r = ras(d_s, d_c)
    if valid is not None:
        nanv = ~valid_arr
        d_s[nanv] = np.nan
        d_c[nanv] = np.nan
        r[nanv] = np.nan

    att = state_attribution(correct0, correct, r, valid_arr if valid is not None else None)
    cnt, tot = att.count, att.total  # (4, D, L) in cc, cw, wc, ww order
    cell_n = cnt.sum(axis=0)
    corr_sum = cnt[0] + cnt[2]
    clean_sum = cnt[0] + cnt[1]
    cell_r_c, cell_r_w = att.source[0], att.source[1]
    n_tot = cell_n.sum()
    cons_sum = consistent.sum(axis=0)
    if valid is None:
        ds_sum, dc_sum = d_s.sum(axis=0), d_c.sum(axis=0)
    else:
        ds_sum = np.where(valid_arr, d_s, 0.0).sum(axis=0)
        dc_sum = np.where(valid_arr, d_c, 0.0).sum(axis=0)

    def model_mean(num: float, den: float) -> float:
        return float(num / den) if den > 0 else float("nan")

    fields = dict(
        corruptions=tuple(corruptions),
        severities=severities,
        n_options=k,
        answers=y,
        p_clean=np.moveaxis(p0t, 0, -1),
        pred_clean=pred0,
        correct_clean=correct0,
        s_clean=s0,
        c_clean=c0,
        conf_clean=conf0.astype(np.float64),
        p_corrupt=np.moveaxis(pxt, 0, -1),
        pred=pred,
        correct=correct,
        consistent=consistent,
        d_s=d_s,
        d_c=d_c,
        ras=r,
        regime=sign_regime(d_s, d_c),
        valid=valid_arr,
        cell_n=cell_n,
        cell_acc=_ratio(corr_sum, cell_n),
        cell_d_acc=_ratio(corr_sum - clean_sum, cell_n),
        cell_consistency=_ratio(cons_sum, cell_n),
        cell_rel_robustness=_ratio(corr_sum, clean_sum),
        cell_ras=att.aggregate,
        cell_r_c=cell_r_c,
        cell_r_w=cell_r_w,
        cell_d_s=_ratio(ds_sum, cell_n),
        cell_d_c=_ratio(dc_sum, cell_n),
        cell_state_count=att.count,
        cell_alpha=att.alpha,
        cell_pi=att.pi,
        acc_clean=float(correct0.mean()),
        acc_corrupt=model_mean(corr_sum.sum(), n_tot),
        d_acc=model_mean(corr_sum.sum() - clean_sum.sum(), n_tot),
        consistency=model_mean(cons_sum.sum(), n_tot),
        rel_robustness=model_mean(corr_sum.sum(), clean_sum.sum()),
        ras_mean=model_mean(tot.sum(), n_tot),
        r_c=model_mean(tot[:2].sum(), clean_sum.sum()),
        r_w=model_mean(tot[2:].sum(), cnt[2:].sum()),
        mixed_cell_rate=mixed_cell_rate(cell_r_c, cell_r_w),
        d_s_mean=model_mean(ds_sum.sum(), n_tot),
        d_c_mean=model_mean(dc_sum.sum(), n_tot),
    )
    for name, val in fields.items():
        if isinstance(val, np.ndarray):
            fields[name] = _freeze(val)
    return GridMetrics(**fields)
