"""Scoring a sample under rotations of its options (docs/spec.md §1, option order).

Each query is expanded into one query per rotation (:func:`benchc.data.rotations.rotations`:
the same image, question and hint, the options in rotated order) and all of them go through
:func:`benchc.models.collate.score`: the backend's own length-grouped batches, so a served
backend answers them like any other query. The result holds option probabilities by *position*
per rotation slot, the layout :mod:`benchc.metrics.position` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from benchc.data.rotations import rotate, rotations
from benchc.metrics.options import option_probs
from benchc.models.base import Backend, Query
from benchc.models.collate import score

__all__ = ["RotationScores", "by_slot", "offset_table", "rotated_queries", "score_rotations"]


@dataclass(frozen=True)
class RotationScores:
    """``probs`` (N, R_max, K_max) float32 by position, NaN in unused slots and padding;
    ``offsets`` (N, R_max) int64, -1 in unused slots; ``n_options`` (N,)."""

    probs: np.ndarray
    offsets: np.ndarray
    n_options: np.ndarray


def rotated_queries(query: Query, offsets: Sequence[int]) -> list[Query]:
    """``query`` once per rotation in ``offsets`` (rotation 0 is the query itself)."""
    return [query if r == 0 else replace(query, options=rotate(query.options, r)) for r in offsets]


def by_slot(rows: np.ndarray, plans: Sequence[Sequence[int]], width: int) -> np.ndarray:
    """Rows of one flat scoring (one per sample and rotation in its ``plans`` entry, in that
    order) as (N, ``width``, K) float32, NaN in the slots a sample does not use and in K
    padding."""
    rows = np.asarray(rows, dtype=np.float32)
    out = np.full((len(plans), width, rows.shape[1]), np.nan, dtype=np.float32)
    at = 0
    for i, plan in enumerate(plans):
        out[i, : len(plan)] = rows[at : at + len(plan)]
        at += len(plan)
    return out


def offset_table(plans: Sequence[Sequence[int]], width: int) -> np.ndarray:
    """(N, ``width``) int64: each sample's rotations (:func:`benchc.data.rotations.rotations`),
    -1 in the slots it does not use."""
    out = np.full((len(plans), width), -1, dtype=np.int64)
    for i, plan in enumerate(plans):
        out[i, : len(plan)] = plan
    return out


def score_rotations(
    backend: Backend,
    queries: Sequence[Query],
    *,
    seed: int = 0,
    batch_size: int | None = None,
) -> RotationScores:
    """Every query under each of its rotations, in the backend's batches. A query needs an
    ``id`` (its rotations are drawn from it when K is large)."""
    if not queries:
        raise ValueError("score_rotations() needs at least one query")
    plan = []
    for i, q in enumerate(queries):
        if q.id is None:
            raise ValueError(f"query {i}: rotations need the sample id (Query.id)")
        plan.append(rotations(len(q.options), q.id, seed))
    flat = [rq for q, offs in zip(queries, plan, strict=True) for rq in rotated_queries(q, offs)]
    logits = np.asarray(score(backend, flat, batch_size=batch_size).option_logits, np.float64)
    r_max = max(len(offs) for offs in plan)
    k = np.array([len(q.options) for q in queries], dtype=np.int64)
    stacked = by_slot(logits, plan, r_max)
    k_max = stacked.shape[-1]
    probs = option_probs(stacked.reshape(-1, k_max), np.repeat(k, r_max)).reshape(stacked.shape)
    return RotationScores(probs.astype(np.float32), offset_table(plan, r_max), k)
