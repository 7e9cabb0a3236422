"""The one definition of every figure: a record per figure, and the two ways it is evaluated.

Each figure (docs/spec.md §4 for Bench-C, §5 for VSI) is a ratio of sums over samples, after
torchmetrics' update/compute split: ``num`` and ``den`` give each sample's (or each
sample x corruption x severity pair's) contribution, and the figure is ``sum(num) / sum(den)``
(``den`` None: a plain count). Summing over samples once gives the point estimate; summing with
bootstrap resample counts ``w`` (B, N) gives every replicate at once (``w @ num / w @ den``), so
the value a gate reports, its replicates, its per-sample explanation and the report's Table II
and cell maps cannot disagree. Cell-level values are the per-cell sums; coarser levels pool the
cells' sums; a figure of cells (``per="cell"``, the Mixed-cell rate) combines cell values.

Adding a figure: :func:`register` a :class:`FigureDef` here; to gate it, give it a floor in
:mod:`benchc.gates.figures`. Names are the code's and the snapshots' names; ``data_key`` is the
older key ``report.json``'s Table II and a snapshot's ``info`` store the figure under (data
formats that stay unchanged).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from benchc import spec
from benchc.metrics.states import attribute, mixed_cell_rate, mixed_cells

Direction = Literal["higher", "lower"]
Source = Literal["grid", "vsi"]
Per = Literal["pair", "sample", "cell"]

#: Per-sample or per-pair contribution: the evidence (a ``GridMetrics`` or a ``VSIEvidence``)
#: in, (N,) or (N, D, L) float64 out, 0 where nothing is counted.
Values = Callable[[Any], np.ndarray]


@dataclass(frozen=True)
class FigureDef:
    """One figure. ``source``: which evidence computes it; ``per``: what ``num``/``den`` are
    over; ``combine``: for ``per="cell"``, the figure from the cell values (last axis = cells);
    ``column``: its Table II header (None: not a Table II column); ``cells``: reported per cell;
    ``explains``: the name of its per-sample values in a failure ("samples that moved most");
    ``pooling="states"``: a cell's point value is Eq. 16 over its four-state table, as the paper
    writes RAS, R_c and R_w (equal to the ratio of sums, which the replicates use);
    ``from_recorded``: ``(fn, names)``, the figure from other recorded figures where a
    snapshot does not record it itself (ΔAcc = accuracy - clean accuracy); ``clean``: the
    clean-side source a per-pair figure is over (R_c: clean-correct pairs, Eq. 15), whose two
    states the model level pools."""

    name: str
    label: str
    source: Source
    per: Per
    direction: Direction
    bounds: tuple[float, float]
    num: Values | None = None
    den: Values | None = None
    combine: Callable[[Mapping[str, np.ndarray]], np.ndarray] | None = None
    column: str | None = None
    cells: bool = False
    data_key: str | None = None
    explains: str | None = None
    pooling: Literal["sum", "states"] = "sum"
    from_recorded: tuple[Callable[..., float], tuple[str, ...]] | None = None
    clean: Literal["any", "correct", "wrong"] = "any"
    #: ``(count, step)``: the figure moves by ``step / count(evidence)`` when one counted unit
    #: (a sample of a share, a cell of a cell rate) changes: its resolution on a dataset.
    units: tuple[Callable[[Any], float], float] | None = None
    #: Which samples it counts depends on the side's *own* answers (R_c, R_w and relative
    #: robustness: that side's clean-correct or clean-wrong pairs; the Mixed-cell rate: their
    #: signs), so a candidate's value is not over the baseline's population: a benign clean flip
    #: moves a sample from one figure's population to the other's wholesale.
    own_population: bool = False
    #: Read from the option rotations (docs/spec.md §4, option order): only evidence that
    #: carries them computes it.
    rotations: bool = False

    @property
    def key(self) -> str:
        """The key ``report.json``'s Table II and snapshot ``info`` use for it."""
        return self.data_key or self.name

    @property
    def is_mean(self) -> bool:
        """``num / den`` per entry is a contribution whose mean is the figure (den is 0 or 1
        and num is 0 where den is), so a sample's own value is meaningful."""
        return self.per != "cell" and self.name not in _NOT_MEANS


#: The registry, in Table II order (report columns, figure tables).
REGISTRY: dict[str, FigureDef] = {}
#: Ratios whose numerator counts where the denominator does not (relative robustness).
_NOT_MEANS = {"relative_robustness"}


def register(fig: FigureDef) -> FigureDef:
    """Add ``fig`` (a name already registered is an error: one definition per figure)."""
    if fig.name in REGISTRY:
        raise ValueError(f"figure {fig.name!r} is already defined")
    if (fig.per == "cell" and fig.combine is None) or (fig.per != "cell" and fig.num is None):
        raise ValueError(f"figure {fig.name!r}: per={fig.per!r} needs num (or combine for cells)")
    REGISTRY[fig.name] = fig
    return fig


def defined(source: Source, per: Per | None = None) -> tuple[FigureDef, ...]:
    """The registered figures of one evidence kind (and one ``per``), in registry order."""
    return tuple(f for f in REGISTRY.values() if f.source == source and per in (None, f.per))


def definition(name: str) -> FigureDef:
    """One figure's record; a clear error for an unknown name."""
    if name not in REGISTRY:
        raise KeyError(f"no figure {name!r}; known: {list(REGISTRY)}")
    return REGISTRY[name]


def explained(source: Source, name: str) -> FigureDef | None:
    """The figure whose per-sample values a failure names ``name`` (``explains``)."""
    for fig in defined(source):
        if fig.explains == name and fig.is_mean:
            return fig
    return None


def rotation_figures() -> tuple[str, ...]:
    """The names of the figures read from option rotations (:attr:`FigureDef.rotations`)."""
    return tuple(f.name for f in REGISTRY.values() if f.rotations)


def table2_figures() -> tuple[FigureDef, ...]:
    """Table II's columns: every grid figure with a ``column`` header, in registry order
    (``report.json`` keys them by :attr:`FigureDef.key`)."""
    return tuple(f for f in defined("grid") if f.column)


def reported_cells() -> tuple[FigureDef, ...]:
    """The figures the report maps per cell (``report.json`` ``cells``, by name)."""
    return tuple(f for f in defined("grid", "pair") if f.cells)


# -- evaluation ---------------------------------------------------------------------------------
def ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """``num / den`` where ``den > 0``, NaN elsewhere (an undefined figure is NaN, never 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


def _sum(x: np.ndarray, w: np.ndarray | None, states: Any = None) -> np.ndarray:
    """Sum over samples (axis 0 of ``x`` (N, ...) flattened to (N, M)): per replicate
    (``w @ x``), or for the point estimate over each correctness state first (``states``:
    (clean source (2, N), corrupted-correct (N, M)), the four-state table of Eqs. 12-16, pooled
    cc, cw, wc, ww in that order) and then over the states."""
    flat = x if x.ndim == 1 else x.reshape(x.shape[0], -1)
    if w is not None:
        return w @ flat
    if states is None:
        return flat.sum(axis=0)
    src, right = states
    table = np.stack([src @ np.where(right, flat, 0.0), src @ np.where(right, 0.0, flat)], 1)
    return table.reshape(4, -1)


def _den(fig: FigureDef, ev: Any, like: np.ndarray) -> np.ndarray | None:
    if fig.den is None:
        return None
    return np.broadcast_to(np.asarray(fig.den(ev), dtype=np.float64), like.shape)


#: Rows of the four-state table (cc, cw, wc, ww) each clean-side source covers.
_SOURCE_ROWS = {"any": slice(None), "correct": slice(0, 2), "wrong": slice(2, 4)}


def evaluate(
    source: Source, ev: Any, w: np.ndarray | None = None, *, cells: bool = False
) -> dict[str, np.ndarray]:
    """Every registered figure of ``source`` on evidence ``ev``: the point estimate (``w``
    None; scalars) or each replicate under resample counts ``w`` (B, N) ((B,) arrays).
    ``cells``: also ``cell_<name>`` (cell shape, or (B, *cell shape)) for per-pair figures."""
    out: dict[str, np.ndarray] = {}
    cell_vals: dict[str, np.ndarray] = {}
    states = None
    if w is None and source == "grid":
        n = ev.valid.shape[0]
        src = np.stack([ev.correct_clean, ~ev.correct_clean]).astype(np.float64)
        states = (src, ev.correct.reshape(n, -1))
    for fig in defined(source):
        if fig.per == "cell":
            continue
        num = np.asarray(fig.num(ev), dtype=np.float64)  # type: ignore[misc]
        den = _den(fig, ev, num)
        pooled = fig.per == "pair" and states is not None
        s_num = _sum(num, w, states if pooled else None)
        s_den = None if den is None else _sum(den, w, states if pooled else None)
        if pooled:  # (4, cells) state table: cells sum it over states, the model over all
            if fig.pooling == "states":
                cell_vals[fig.name] = attribute(s_den, s_num)[4]
            else:
                cell_vals[fig.name] = ratio(s_num.sum(axis=0), s_den.sum(axis=0))
            rows = _SOURCE_ROWS[fig.clean]
            s_num, s_den = s_num[rows].sum(), s_den[rows].sum()
            if cells:
                out[f"cell_{fig.name}"] = cell_vals[fig.name].reshape(num.shape[1:])
        elif fig.per == "pair":
            cell_vals[fig.name] = ratio(s_num, s_den) if s_den is not None else s_num
            s_num, s_den = s_num.sum(axis=-1), None if s_den is None else s_den.sum(axis=-1)
            if cells:
                shape = num.shape[1:] if w is None else (w.shape[0], *num.shape[1:])
                out[f"cell_{fig.name}"] = cell_vals[fig.name].reshape(shape)
        out[fig.name] = s_num if s_den is None else ratio(s_num, s_den)
    for fig in defined(source, "cell"):
        out[fig.name] = np.asarray(fig.combine(cell_vals), dtype=np.float64)  # type: ignore[misc]
    return out


def resolution(name: str, ev: Any) -> float:
    """The smallest move the figure can make on evidence ``ev``: one counted unit's worth
    (1/n for a share of n samples, 100/cells for a cell rate); 0 for a continuous figure."""
    fig = definition(name)
    if fig.units is None:
        return 0.0
    count, step = fig.units
    n = float(count(ev))
    return step / n if n > 0 else float("nan")


def per_sample(source: Source, ev: Any, name: str) -> np.ndarray | None:
    """Each sample's own value (N,) of the figure that ``explains`` ``name``: the mean of its
    contributions (NaN: the sample counts towards nothing); None for an unknown name."""
    fig = explained(source, name)
    if fig is None:
        return None
    values = contributions(fig, ev)
    if values.ndim == 1:
        return values
    with warnings.catch_warnings():  # a sample with no counted pair: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(values.reshape(values.shape[0], -1), axis=1)


def contributions(fig: FigureDef, ev: Any) -> np.ndarray:
    """Per-entry values (N,) or (N, D, L) whose mean is the figure, NaN where an entry does
    not count (what names the samples that moved a figure most)."""
    if not fig.is_mean or fig.num is None:
        raise ValueError(f"{fig.name}: no per-sample form (not a mean of contributions)")
    num = np.asarray(fig.num(ev), dtype=np.float64)
    den = _den(fig, ev, num)
    return num if den is None else np.where(den > 0, num, np.nan)


# -- the figures ---------------------------------------------------------------------------------
def _ok(g: Any) -> np.ndarray:
    return g.valid


def _cc(g: Any) -> np.ndarray:
    return np.broadcast_to(g.correct_clean[:, None, None], g.valid.shape)


def _on(values: Callable[[Any], np.ndarray]) -> Values:
    """A per-pair quantity counted on valid pairs (0 elsewhere)."""
    return lambda g: np.where(_ok(g), values(g), 0.0)


def _mixed(cells: Mapping[str, np.ndarray]) -> np.ndarray:
    """Mixed-cell rate over the last axis (cells): 100 x share with R_c < 0 and R_w > 0, a
    cell R within 1e-6 of 0 having no sign (:func:`benchc.metrics.states.mixed_cells`)."""
    r_c, r_w = cells["r_c"], cells["r_w"]
    if r_c.ndim == 1:
        return np.asarray(mixed_cell_rate(r_c, r_w))
    mixed, both = mixed_cells(r_c, r_w)
    return ratio(100.0 * mixed.sum(axis=-1), both.sum(axis=-1))


def _p_answer(p: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """The probability of each entry's correct option: ``p`` (N, ..., K) at ``answers`` (N,)."""
    idx = answers.reshape((-1,) + (1,) * (p.ndim - 1))
    return np.take_along_axis(p, np.broadcast_to(idx, (*p.shape[:-1], 1)), axis=-1)[..., 0]


def _ref_correct(g: Any) -> np.ndarray:
    """The baseline's corrupted-pair correctness (N, D, L) a candidate is paired with; without
    one (the baseline itself) its own, so it flips nothing against itself."""
    ref = getattr(g, "ref_correct", None)
    return g.correct if ref is None else ref


def _ref_correct_clean(g: Any) -> np.ndarray:
    """The clean counterpart of :func:`_ref_correct` (N,)."""
    ref = getattr(g, "ref_correct_clean", None)
    return g.correct_clean if ref is None else ref


def _pairs(g: Any) -> float:
    """Corrupted pairs that count (a share of them moves by whole pairs)."""
    return float(np.asarray(_ok(g)).sum())


def _samples(g: Any) -> float:
    """Samples (a share of them moves by whole samples)."""
    return float(np.asarray(g.correct_clean).shape[0])


def _defined_cells(g: Any) -> float:
    """Cells where both R_c and R_w are defined (the Mixed-cell rate's denominator)."""
    return float((~np.isnan(g.cell("r_c")) & ~np.isnan(g.cell("r_w"))).sum())


def _ordered(g: Any) -> float:
    """Corrupted pairs whose rotations were scored (circular accuracy's unit)."""
    return float(np.asarray(g.order_on).sum())


def _spread0(g: Any) -> np.ndarray:
    return np.broadcast_to(g.spread_clean[:, None, None], g.order_on.shape)


def _both(g: Any) -> np.ndarray:
    """Pairs scored under rotations whose clean image was too (the interaction's pairs)."""
    return g.order_on & np.broadcast_to(g.order_on_clean[:, None, None], g.order_on.shape)


_RAS = (-2.0, 1.0)
_UNIT = (0.0, 1.0)
_PAIR = dict(source="grid", per="pair", den=_ok, cells=True)
_ORDER = dict(source="grid", per="pair", rotations=True)

for _fig in (
    FigureDef("acc_clean", "clean accuracy", "grid", "sample", "higher", _UNIT,
              num=lambda g: g.correct_clean, den=lambda g: np.ones(g.correct_clean.shape),
              column="Acc (clean)"),
    FigureDef("accuracy", "corrupted accuracy", direction="higher", bounds=_UNIT,
              num=_on(lambda g: g.correct), column="Acc (corrupted)", data_key="acc_corrupt",
              explains="correct", units=(_pairs, 1.0), **_PAIR),
    FigureDef("d_acc", "accuracy change", direction="higher", bounds=(-1.0, 1.0),
              num=_on(lambda g: g.correct.astype(float) - _cc(g)), column="ΔAcc",
              from_recorded=(operator.sub, ("accuracy", "acc_clean")), **_PAIR),
    FigureDef("consistency", "consistency", direction="higher", bounds=_UNIT,
              num=_on(lambda g: g.consistent), column="Consistency", explains="consistent",
              units=(_pairs, 1.0), **_PAIR),
    FigureDef("relative_robustness", "relative robustness", "grid", "pair", "higher",
              (0.0, float("inf")), num=_on(lambda g: g.correct), den=lambda g: _ok(g) & _cc(g),
              column="Rel. Rob.", cells=True, data_key="rel_robustness", explains="correct",
              units=(lambda g: float((_ok(g) & _cc(g)).sum()), 1.0), own_population=True),
    FigureDef("ras", "RAS", direction="higher", bounds=_RAS, num=_on(lambda g: g.ras),
              column="RAS", explains="ras", pooling="states", **_PAIR),
    FigureDef("d_s", "entropy change", direction="lower", bounds=(-1.0, 1.0),
              num=_on(lambda g: g.d_s), column="ΔS", **_PAIR),
    FigureDef("d_c", "alignment change", direction="higher", bounds=(-1.0, 1.0),
              num=_on(lambda g: g.d_c), column="ΔC", **_PAIR),
    FigureDef("r_c", "R_c (clean-correct RAS)", "grid", "pair", "higher", _RAS,
              num=lambda g: np.where(_ok(g), g.ras, 0.0) * _cc(g),
              den=lambda g: _ok(g) & _cc(g), column="R_c", cells=True,
              explains="ras_clean_correct", pooling="states", clean="correct",
              own_population=True),
    FigureDef("r_w", "R_w (clean-wrong RAS)", "grid", "pair", "higher", _RAS,
              num=lambda g: np.where(_ok(g), g.ras, 0.0) * (1 - _cc(g)),
              den=lambda g: _ok(g) & ~_cc(g), column="R_w", cells=True,
              explains="ras_clean_wrong", pooling="states", clean="wrong", own_population=True),
    # docs/spec.md §6, "the most informative per-sample value": the probability of the
    # correct option carries what 0/1 correctness throws away, so a paired gate on it resolves
    # a churning checkpoint (samples moving both ways) that accuracy cannot
    FigureDef("p_correct", "probability of the correct option (corrupted)", direction="higher",
              bounds=_UNIT, num=_on(lambda g: np.nan_to_num(_p_answer(g.p_corrupt, g.answers))),
              explains="p_correct", **{**_PAIR, "cells": False}),
    FigureDef("p_correct_clean", "probability of the correct option (clean)", "grid", "sample",
              "higher", _UNIT, num=lambda g: _p_answer(g.p_clean, g.answers).astype(np.float64),
              den=lambda g: np.ones(g.correct_clean.shape), explains="p_correct_clean"),
    # negative flips (Yan et al., CVPR 2021): right on the baseline, wrong on the candidate,
    # paired by construction (the candidate's evidence carries the baseline's correctness;
    # the baseline against itself flips nothing)
    FigureDef("negative_flips", "negative flip rate (corrupted)", direction="lower",
              bounds=_UNIT, num=_on(lambda g: _ref_correct(g) & ~g.correct),
              explains="negative_flip", units=(_pairs, 1.0), **{**_PAIR, "cells": False}),
    FigureDef("negative_flips_clean", "negative flip rate (clean)", "grid", "sample", "lower",
              _UNIT, num=lambda g: _ref_correct_clean(g) & ~g.correct_clean,
              den=lambda g: np.ones(g.correct_clean.shape), explains="negative_flip_clean",
              units=(_samples, 1.0)),
    # option order (docs/spec.md §4): each counted over the pairs (or samples) whose
    # rotations were scored, undefined (NaN) on a run that scored none
    FigureDef("circular_accuracy", "circular accuracy (corrupted)", direction="higher",
              bounds=_UNIT, num=lambda g: g.circular, den=lambda g: g.order_on,
              explains="circular", units=(_ordered, 1.0), **_ORDER),
    FigureDef("circular_accuracy_clean", "circular accuracy (clean)", "grid", "sample",
              "higher", _UNIT, num=lambda g: g.circular_clean, den=lambda g: g.order_on_clean,
              explains="circular_clean", units=(lambda g: float(g.order_on_clean.sum()), 1.0),
              rotations=True),
    FigureDef("position_preference", "position preference (corrupted)", direction="lower",
              bounds=_UNIT, num=lambda g: g.spread, den=lambda g: g.order_on,
              explains="position_spread", **_ORDER),
    FigureDef("position_preference_clean", "position preference (clean)", "grid", "sample",
              "lower", _UNIT, num=lambda g: g.spread_clean, den=lambda g: g.order_on_clean,
              explains="position_spread_clean", rotations=True),
    FigureDef("order_interaction", "corruption x option order interaction", direction="lower",
              bounds=(-1.0, 1.0), num=lambda g: np.where(_both(g), g.spread - _spread0(g), 0.0),
              den=_both, explains="order_shift", **_ORDER),
    FigureDef("mixed_cell_rate", "Mixed-cell rate (%)", "grid", "cell", "lower", (0.0, 100.0),
              combine=_mixed, column="Mixed (%)", units=(_defined_cells, 100.0),
              own_population=True),
    FigureDef("insensitive_fraction", f"insensitive fraction (VSI < {spec.VSI_INSENSITIVE:g})",
              "vsi", "sample", "lower", _UNIT, num=lambda e: e.low,
              den=lambda e: np.ones(e.low.shape), explains="insensitive",
              units=(lambda e: len(e.ids), 1.0)),
    FigureDef("gap", "encoder-LLM gap", "vsi", "sample", "lower", (-1.0, 1.0),
              num=lambda e: np.where(e.pool, e.probe_correct - e.changed, 0.0),
              den=lambda e: e.pool, explains="gap_terms", units=(lambda e: e.pool.sum(), 1.0)),
    FigureDef("probe_accuracy", "probe accuracy (low-VSI pool)", "vsi", "sample", "higher",
              _UNIT, num=lambda e: np.where(e.pool, e.probe_correct, 0.0), den=lambda e: e.pool),
    FigureDef("argmax_change_rate", "argmax change rate (low-VSI pool)", "vsi", "sample",
              "higher", _UNIT, num=lambda e: np.where(e.pool, e.changed, 0.0),
              den=lambda e: e.pool),
    FigureDef("probe_accuracy_high", "probe accuracy (high-VSI control)", "vsi", "sample",
              "higher", _UNIT, num=lambda e: np.where(e.control, e.probe_correct, 0.0),
              den=lambda e: e.control),
    FigureDef("argmax_change_rate_high", "argmax change rate (high-VSI control)", "vsi",
              "sample", "higher", _UNIT, num=lambda e: np.where(e.control, e.changed, 0.0),
              den=lambda e: e.control),
    FigureDef("n_low_vsi", "low-VSI samples", "vsi", "sample", "higher", (0.0, float("inf")),
              num=lambda e: e.low),
    FigureDef("n_pool", "low-VSI pool size", "vsi", "sample", "higher", (0.0, float("inf")),
              num=lambda e: e.pool),
):  # fmt: skip
    register(_fig)

__all__ = [
    "REGISTRY",
    "FigureDef",
    "contributions",
    "defined",
    "definition",
    "evaluate",
    "explained",
    "per_sample",
    "ratio",
    "register",
    "reported_cells",
    "resolution",
    "rotation_figures",
    "table2_figures",
]
