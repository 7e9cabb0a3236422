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

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from benchc import spec
from benchc.metrics.figures import contributions, defined, definition, evaluate
from benchc.metrics.options import (
    alignment_from_top,
    entropy_option_first,
    probs_option_first,
    to_option_first,
    top_option_first,
    validate_answers,
    validate_option_logits,
)
from benchc.metrics.position import order_pairs
from benchc.metrics.ras import RegimeTable, ras, regime_table, sign_regime
from benchc.metrics.states import StateAttribution, state_attribution
from benchc.metrics.stats import DEFAULT_N_BOOT, replicate_se, resample_counts
from benchc.metrics.trajectories import TrajectorySummary, trajectory_classes, trajectory_summary

__all__ = [
    "GridMetrics",
    "compute_grid",
    "grid_from_logits",
    "split_conditions",
]


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
    Per cell (D, L): ``cell_n``; ``cell_state_count`` / ``cell_alpha`` (4, D, L) in cc, cw,
    wc, ww order; ``cell_pi`` (2, D, L) for sources c, w.
    Figures (:mod:`benchc.metrics.figures`, by name): ``figures`` (model level, float) and
    ``cells`` ((D, L) per cell, per-pair figures only).
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
    cell_state_count: np.ndarray
    cell_alpha: np.ndarray
    cell_pi: np.ndarray
    figures: Mapping[str, float] = field(default_factory=dict)
    cells: Mapping[str, np.ndarray] = field(default_factory=dict)
    #: The baseline's correctness a candidate is paired with (clean (N,), corrupted (N, D, L)),
    #: for the negative flip rates; None: not paired (the figures compare it with itself).
    ref_correct_clean: np.ndarray | None = None
    ref_correct: np.ndarray | None = None
    #: Option order (docs/spec.md §4, option order): where the sample's rotations were scored
    #: (clean (N,), corrupted (N, D, L)), whether it was right under every one (``circular``)
    #: and its position spread (:func:`benchc.metrics.position.order_pairs`); all False / 0
    #: when the run scored no rotation (the order figures are then undefined, never 0).
    order_on_clean: np.ndarray | None = None
    circular_clean: np.ndarray | None = None
    spread_clean: np.ndarray | None = None
    order_on: np.ndarray | None = None
    circular: np.ndarray | None = None
    spread: np.ndarray | None = None

    @property
    def shape(self) -> tuple[int, int, int]:
        """(N, D, L)."""
        return self.valid.shape  # type: ignore[return-value]

    def figure(self, name: str) -> float:
        """One model-level figure by name (:mod:`benchc.metrics.figures`)."""
        return self.figures[definition(name).name]

    def cell(self, name: str) -> np.ndarray:
        """One per-pair figure's (D, L) cell values by name."""
        return self.cells[definition(name).name]

    def model_figures(self) -> dict[str, float]:
        """Every registered grid figure at model level, by name."""
        return dict(self.figures)

    def cell_figures(self) -> dict[str, np.ndarray]:
        """Every per-pair figure's (D, L) cell values, by name."""
        return dict(self.cells)

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
        it most (:func:`benchc.metrics.figures.contributions`)."""
        fig = definition(figure)
        if fig.per != "pair" or not fig.is_mean:
            raise ValueError(f"pair_values: no per-pair form for {figure!r}")
        return contributions(fig, self)

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
        n = self.valid.shape[0]
        w = resample_counts(n, n_boot, seed) if counts is None else np.asarray(counts, float)
        if w.ndim != 2 or w.shape[1] != n:
            raise ValueError(f"bootstrap: counts must be (B, {n}), got {w.shape}")
        return evaluate("grid", self, w, cells=True)

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
    reference: np.ndarray | None = None,
    rotated: tuple[np.ndarray, np.ndarray] | None = None,
) -> GridMetrics:
    """:func:`compute_grid` on the stored layout (N, 1 + D*L, K_max), clean condition first;
    ``reference`` (N, 1 + D*L) bool, the baseline's correctness in the same layout;
    ``rotated``: (logits (N, 1 + D*L, R_max - 1, K_max) under the other rotations, NaN where
    not scored; offsets (N, R_max))."""
    clean, corrupt = split_conditions(logits, n_severities)
    ref = None
    if reference is not None:
        ref_clean, ref_corrupt = split_conditions(np.asarray(reference)[..., None], n_severities)
        ref = (ref_clean[:, 0], ref_corrupt[..., 0])
    order = None
    if rotated is not None:
        stacked, offsets = rotated
        n, c, r, k = np.shape(stacked)
        flat = np.asarray(stacked).reshape(n, c, r * k)
        rot_clean, rot_corrupt = split_conditions(flat, n_severities)
        order = (
            rot_clean.reshape(n, r, k),
            rot_corrupt.reshape(*rot_corrupt.shape[:3], r, k),
            np.asarray(offsets),
        )
    return compute_grid(
        clean,
        corrupt,
        answers,
        n_options,
        valid=valid,
        corruptions=corruptions,
        reference=ref,
        rotated=order,
    )


def compute_grid(
    logits_clean: np.ndarray,
    logits_corrupt: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray | None = None,
    *,
    valid: np.ndarray | None = None,
    corruptions: tuple[str, ...] | None = None,
    reference: tuple[np.ndarray, np.ndarray] | None = None,
    rotated: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> GridMetrics:
    """Compute every Bench-C figure (docs/spec.md §4) for one model.

    ``logits_clean`` (N, K_max), ``logits_corrupt`` (N, D, L, K_max) NaN-padded option logits;
    ``answers`` (N,) int; ``n_options`` (N,) int or None to read K from the padding; ``valid``
    (N, D, L) bool marks usable corrupted pairs (default all; invalid pairs may hold NaN logits
    and are excluded everywhere). ``reference``: the baseline's correctness (clean (N,),
    corrupted (N, D, L) bool) this grid is paired with, for the negative flip rates.
    ``rotated``: the option logits under each sample's other rotations (clean (N, R - 1, K_max),
    corrupted (N, D, L, R - 1, K_max), NaN where not scored) and the rotations' offsets (N, R)
    (:mod:`benchc.data.rotations`), for the option-order figures.
    ``corruptions`` names the D axis (default the 19 names of
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
        cell_n=att.count.sum(axis=0),
        cell_state_count=att.count,
        cell_alpha=att.alpha,
        cell_pi=att.pi,
    )
    if reference is not None:
        ref_clean, ref_corrupt = (np.asarray(a, dtype=bool) for a in reference)
        if ref_clean.shape != (n,) or ref_corrupt.shape != (n, d, n_sev):
            raise ValueError(
                f"reference: expected ({n},) and {(n, d, n_sev)}, got {ref_clean.shape} and "
                f"{ref_corrupt.shape}"
            )
        fields.update(ref_correct_clean=ref_clean, ref_correct=ref_corrupt & valid_arr)
    fields.update(_order_fields(lc, lx, valid_arr, y, k, rotated))
    values = evaluate("grid", SimpleNamespace(**fields), cells=True)
    fields["figures"] = {f.name: float(values[f.name]) for f in defined("grid")}
    fields["cells"] = {f.name: _freeze(values[f"cell_{f.name}"]) for f in defined("grid", "pair")}
    for name, val in fields.items():
        if isinstance(val, np.ndarray):
            fields[name] = _freeze(val)
    return GridMetrics(**fields)


def _order_fields(
    lc: np.ndarray,
    lx: np.ndarray,
    valid: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray,
    rotated: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> dict[str, np.ndarray]:
    """The option-order fields of :class:`GridMetrics` (all False / 0 without rotations)."""
    n, d, n_sev = valid.shape
    if rotated is None:
        no, none = np.zeros(n, dtype=bool), np.zeros(valid.shape, dtype=bool)
        return dict(order_on_clean=no, circular_clean=no, spread_clean=np.zeros(n),
                    order_on=none, circular=none, spread=np.zeros(valid.shape))  # fmt: skip
    rot_clean, rot_corrupt, offsets = (np.asarray(a) for a in rotated)
    r = offsets.shape[1] - 1
    k_max = lc.shape[-1]
    if rot_clean.shape != (n, r, k_max) or rot_corrupt.shape != (n, d, n_sev, r, k_max):
        raise ValueError(
            f"rotated: expected ({n}, {r}, {k_max}) and {(n, d, n_sev, r, k_max)} for offsets "
            f"{offsets.shape}, got {rot_clean.shape} and {rot_corrupt.shape}"
        )
    on0, circ0, spread0 = order_pairs(lc, rot_clean, offsets, answers, n_options)
    cells = d * n_sev
    on, circ, spread = order_pairs(
        lx.reshape(n * cells, k_max),
        rot_corrupt.reshape(n * cells, r, k_max),
        np.repeat(offsets, cells, axis=0),
        np.repeat(answers, cells),
        np.repeat(n_options, cells),
    )
    shape = valid.shape
    on = on.reshape(shape) & valid
    spread = np.where(on, spread.reshape(shape), 0.0)
    return dict(order_on_clean=on0, circular_clean=circ0, spread_clean=spread0, order_on=on,
                circular=circ.reshape(shape) & on, spread=spread)  # fmt: skip
