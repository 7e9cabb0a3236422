"""The testable core of selection: arrays in, selection + report out (no models, no images).

Eqs. 1-6 and Table I live in :mod:`benchc.metrics.selection`; this module adds what a release
needs around them: per-selector clean accuracy, the kappa distribution before/after, the
category shift, leave-one-selector-out Jaccard (fixed and recomputed pool) and the
semantic-only vs inconsistency-only overlap the paper reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchc.metrics.selection import Selection, jaccard, leave_one_selector_out, select

#: Histogram bin edges for the kappa distribution (kappa lies in [0, 1]).
KAPPA_BINS = np.linspace(0.0, 1.0, 11)


@dataclass(frozen=True)
class SelectionRun:
    """Everything a report needs; arrays are indexed by pool position."""

    ids: tuple[str, ...]
    categories: tuple[str, ...]
    answers: np.ndarray  # int64 (Q,)
    n_options: np.ndarray  # int64 (Q,)
    top1: np.ndarray  # int64 (F, Q, D, L)
    clean_top1: np.ndarray  # int64 (F, Q)
    selector_names: tuple[str, ...]
    selection: Selection
    loso: list[dict[str, Any]] | None
    single_criterion_ji: float


def run_selection(
    top1: np.ndarray,
    n_options: np.ndarray,
    image_emb: np.ndarray,
    text_emb: np.ndarray,
    *,
    ids: Sequence[str],
    categories: Sequence[str | None],
    answers: np.ndarray,
    clean_top1: np.ndarray,
    selector_names: Sequence[str],
) -> SelectionRun:
    """Select (Eqs. 1-6) and run the robustness checks of Table I."""
    top1 = np.asarray(top1)
    q = len(ids)
    if top1.ndim != 4 or top1.shape[1] != q:
        raise ValueError(f"top1: expected (F, {q}, D, L), got shape {top1.shape}")
    if len(selector_names) != top1.shape[0]:
        raise ValueError(f"{len(selector_names)} selector names for {top1.shape[0]} selectors")
    if np.asarray(clean_top1).shape != top1.shape[:2]:
        raise ValueError(f"clean_top1: expected {top1.shape[:2]}, got {np.shape(clean_top1)}")
    sel = select(top1, n_options, image_emb, text_emb)
    loso = None
    if top1.shape[0] >= 2:
        loso = [
            {
                "removed": selector_names[r.removed],
                "fixed_ji": r.fixed_ji,
                "fixed_retained": r.fixed_retained,
                "recomputed_ji": r.recomputed_ji,
                "recomputed_retained": r.recomputed_retained,
                "n_selected": r.n_selected,
            }
            for r in leave_one_selector_out(top1, n_options, image_emb, text_emb)
        ]
    return SelectionRun(
        ids=tuple(ids),
        categories=tuple(c or "(none)" for c in categories),
        answers=np.asarray(answers, np.int64),
        n_options=np.asarray(n_options, np.int64),
        top1=top1,
        clean_top1=np.asarray(clean_top1, np.int64),
        selector_names=tuple(selector_names),
        selection=sel,
        loso=loso,
        single_criterion_ji=single_criterion_overlap(sel),
    )


def single_criterion_overlap(sel: Selection) -> float:
    """Jaccard of inconsistency-only (kappa > mean) vs semantic-only (nu > mean) selection in A+."""
    elig = sel.eligible
    if not elig.any():
        return float("nan")
    by_kappa = elig & (sel.kappa > sel.kappa[elig].mean())
    nu = np.nan_to_num(sel.novelty, nan=-np.inf)
    by_novelty = elig & (nu > np.nanmean(sel.novelty[elig]))
    return jaccard(by_kappa, by_novelty)


def _dist(values: np.ndarray) -> dict[str, Any]:
    counts, _ = np.histogram(values, bins=KAPPA_BINS)
    finite = values[np.isfinite(values)]
    return {
        "n": int(values.size),
        "mean": float(finite.mean()) if finite.size else float("nan"),
        "median": float(np.median(finite)) if finite.size else float("nan"),
        "histogram": counts.astype(int).tolist(),
    }


def _shares(cats: Sequence[str], mask: np.ndarray) -> dict[str, float]:
    chosen = [c for c, m in zip(cats, mask, strict=True) if m]
    counts = Counter(chosen)
    return {c: counts[c] / len(chosen) if chosen else float("nan") for c in sorted(set(cats))}


def build_report(run: SelectionRun) -> dict[str, Any]:
    """A JSON-able summary: sizes, kappa distribution, category shift, LOSO, selector accuracy."""
    sel = run.selection
    everyone = np.ones(len(run.ids), bool)
    masks = {"pool": everyone, "eligible": sel.eligible, "selected": sel.selected}
    cats = run.categories
    share = {name: _shares(cats, m) for name, m in masks.items()}
    counts = {
        name: dict(sorted(Counter(c for c, x in zip(cats, m, strict=True) if x).items()))
        for name, m in masks.items()
    }
    correct = run.clean_top1 == run.answers[None, :]
    selectors = []
    for f, name in enumerate(run.selector_names):
        selectors.append(
            {
                "name": name,
                "clean_accuracy_pool": float(correct[f].mean()),
                "clean_accuracy_selected": float(correct[f][sel.selected].mean())
                if sel.selected.any()
                else float("nan"),
                "selected_clean_correct": int(correct[f][sel.selected].sum()),
                "selected_clean_wrong": int((~correct[f])[sel.selected].sum()),
            }
        )
    sel_answers = run.answers[sel.selected]
    return {
        "n_pool": len(run.ids),
        "n_eligible": int(sel.eligible.sum()),
        "n_selected": int(sel.selected.sum()),
        "e_threshold": float(np.nanmean(sel.e[sel.eligible])) if sel.eligible.any() else None,
        "kappa_bins": KAPPA_BINS.round(3).tolist(),
        "kappa": {name: _dist(sel.kappa[m]) for name, m in masks.items()},
        "category_counts": counts,
        "category_share": share,
        "category_shift": {c: share["selected"][c] - share["pool"][c] for c in sorted(set(cats))},
        "selected_answer_letters": np.bincount(
            sel_answers, minlength=int(run.n_options.max(initial=2))
        )
        .astype(int)
        .tolist(),
        "selectors": selectors,
        "leave_one_selector_out": run.loso,
        "inconsistency_vs_semantic_ji": run.single_criterion_ji,
    }


def per_sample_rows(run: SelectionRun) -> list[dict[str, Any]]:
    """One row per candidate: id, category, kappa, eligible, novelty, e, greedy rank, selected."""
    sel = run.selection
    rank = np.full(len(run.ids), -1)
    rank[sel.order] = np.arange(sel.order.size)
    return [
        {
            "id": sid,
            "category": run.categories[i],
            "kappa": float(sel.kappa[i]),
            "eligible": bool(sel.eligible[i]),
            "novelty": None if np.isnan(sel.novelty[i]) else float(sel.novelty[i]),
            "e": None if np.isnan(sel.e[i]) else float(sel.e[i]),
            "greedy_rank": int(rank[i]),
            "selected": bool(sel.selected[i]),
            "clean_top1": run.clean_top1[:, i].astype(int).tolist(),
        }
        for i, sid in enumerate(run.ids)
    ]
