"""Model-level rank mismatch across metrics (supplementary Table VI).

Each metric ranks the models (rank 1 best); the reference metric (RAS) orders the rows, and
every other metric gets the shift dr = r_RAS - r_m: negative when the response metric ranks the
model lower than RAS does, positive when it ranks it higher (overestimates structure).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from benchc.metrics.grid import GridMetrics

__all__ = ["TABLE_VI_METRICS", "RankTable", "rank_mismatch", "rank_table_from_grids"]

#: Table VI columns: absolute robustness (corrupted accuracy), dAcc, relative robustness, RAS.
TABLE_VI_METRICS: tuple[str, ...] = ("accuracy", "d_acc", "relative_robustness", "ras")


@dataclass(frozen=True)
class RankTable:
    """``models`` in row order (best reference rank first); ``metrics`` column names;
    ``scores``, ``ranks`` (int, 1 best, ties share the best rank) and ``shift`` (r_ref - r_m,
    0 in the reference column), each (n_models, n_metrics) in that row/column order."""

    models: tuple[str, ...]
    metrics: tuple[str, ...]
    scores: np.ndarray
    ranks: np.ndarray
    shift: np.ndarray
    reference: str


def rank_mismatch(
    models: Sequence[str],
    scores: Mapping[str, np.ndarray],
    reference: str = "ras",
    higher_is_better: Mapping[str, bool] | None = None,
    decimals: int | None = None,
) -> RankTable:
    """Rank models by every metric in ``scores`` ({metric: (n_models,)}) and compare with
    ``reference``. All metrics are higher-is-better unless ``higher_is_better`` says otherwise.
    Rows are sorted by reference rank (stable: input order among ties). ``decimals``: scores
    equal at that many decimals (as a table shows them) tie and share the best rank."""
    names = tuple(models)
    if len(set(names)) != len(names):
        raise ValueError(f"rank_mismatch: model names repeat: {names}")
    if reference not in scores:
        raise ValueError(f"rank_mismatch: reference metric {reference!r} not in {list(scores)}")
    cols = tuple(scores)
    table = np.empty((len(names), len(cols)))
    for j, m in enumerate(cols):
        v = np.asarray(scores[m], dtype=np.float64)
        if v.shape != (len(names),):
            raise ValueError(f"scores[{m!r}]: expected shape ({len(names)},), got {v.shape}")
        bad = np.nonzero(~np.isfinite(v))[0]
        if bad.size:
            raise ValueError(
                f"scores[{m!r}][{int(bad[0])}] ({names[bad[0]]}): score is {v[bad[0]]}"
            )
        table[:, j] = v
    sign = np.array([1.0 if (higher_is_better or {}).get(m, True) else -1.0 for m in cols])
    keyed = table if decimals is None else np.round(table, decimals)
    from scipy.stats import rankdata  # here: scipy.stats costs a run's start 0.7 s

    ranks = np.column_stack(
        [rankdata(-sign[j] * keyed[:, j], method="min").astype(np.int64) for j in range(len(cols))]
    )
    ref = cols.index(reference)
    shift = ranks[:, [ref]] - ranks
    order = np.argsort(ranks[:, ref], kind="stable")
    return RankTable(
        tuple(names[i] for i in order), cols, table[order], ranks[order], shift[order], reference
    )


def rank_table_from_grids(
    grids: Mapping[str, GridMetrics], decimals: int | None = None
) -> RankTable:
    """Table VI straight from each model's :class:`GridMetrics` (``decimals``: see
    :func:`rank_mismatch`)."""
    figs = {name: g.model_figures() for name, g in grids.items()}
    scores = {m: np.array([figs[n][m] for n in grids]) for m in TABLE_VI_METRICS}
    return rank_mismatch(list(grids), scores, reference="ras", decimals=decimals)
