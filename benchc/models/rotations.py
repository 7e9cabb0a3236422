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

__all__ = ["RotationScores", "rotated_queries", "score_rotations"]


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
    n = len(queries)
    r_max = max(len(offs) for offs in plan)
    k_max = logits.shape[1]
    k = np.array([len(q.options) for q in queries], dtype=np.int64)
    probs = np.full((n, r_max, k_max), np.nan, dtype=np.float32)
    offsets = np.full((n, r_max), -1, dtype=np.int64)
    row = 0
    for i, offs in enumerate(plan):
        block = logits[row : row + len(offs)]
        probs[i, : len(offs)] = option_probs(block, np.full(len(offs), k[i]))
        offsets[i, : len(offs)] = offs
        row += len(offs)
    return RotationScores(probs, offsets, k)
