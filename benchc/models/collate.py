"""Batching outside the model code, in the spirit of lm-evaluation-harness's ``Collator``.

Left padding moves a padded row's letter logits by up to ~1e-3, while unpadded rows move only
by float rounding (~1e-6) with the batch size. So queries are grouped by a length key (equal
key = equal prompt length), full batches are cut from each group first, and only the leftovers
of different lengths share (padded) batches, longest first. Results return in the caller's order.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import fields

import numpy as np

from benchc.models.base import Backend, BatchOutput, Query


def plan_batches(
    keys: Sequence[Hashable], batch_size: int, *, mix_lengths: bool = True
) -> list[list[int]]:
    """Split item indices ``0..n-1`` into batches of at most ``batch_size``.

    Items with equal ``keys`` are batched together first (longest key first, original order
    within a key). Leftovers smaller than a batch are merged across keys in key order when
    ``mix_lengths`` (fewer forward passes, padded rows) or kept apart otherwise (every row
    unpadded, so a result depends on its batch mates only through float rounding).
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[key].append(i)
    ordered = sorted(groups, key=_sort_key, reverse=True)
    batches: list[list[int]] = []
    leftovers: list[int] = []
    for key in ordered:
        members = groups[key]
        n_full = len(members) - len(members) % batch_size
        batches.extend(members[i : i + batch_size] for i in range(0, n_full, batch_size))
        rest = members[n_full:]
        if rest and mix_lengths:
            leftovers.extend(rest)
        elif rest:
            batches.append(rest)
    batches.extend(leftovers[i : i + batch_size] for i in range(0, len(leftovers), batch_size))
    return batches


def padding_waste(lengths: Sequence[int], plan: Sequence[Sequence[int]]) -> float:
    """Share of a plan's token slots that are padding: each batch is as long as its longest
    row (``lengths``: each item's true input length)."""
    slots = sum(max(lengths[i] for i in batch) * len(batch) for batch in plan)
    used = sum(lengths[i] for batch in plan for i in batch)
    return (slots - used) / slots if slots else 0.0


def _sort_key(key: Hashable) -> tuple:
    return key if isinstance(key, tuple) else (key,)


class Collator:
    """Plans batches over ``items`` by ``key_fn`` and restores per-item results to input order."""

    def __init__(
        self,
        items: Sequence[Query],
        key_fn: Callable[[Query], Hashable],
        batch_size: int,
        *,
        mix_lengths: bool = True,
    ) -> None:
        self.items = items
        self.plan = plan_batches([key_fn(q) for q in items], batch_size, mix_lengths=mix_lengths)

    def batches(self) -> list[list[Query]]:
        """The planned batches of queries (each a list, in planned order)."""
        return [[self.items[i] for i in batch] for batch in self.plan]

    def restore(self, outputs: Sequence[BatchOutput]) -> BatchOutput:
        """Concatenate one output per planned batch and reorder rows to the input order."""
        if len(outputs) != len(self.plan):
            raise ValueError(f"expected {len(self.plan)} batch outputs, got {len(outputs)}")
        merged = concat_outputs(outputs)
        order = np.concatenate([np.asarray(b, dtype=np.int64) for b in self.plan])
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return take_rows(merged, inverse)


def score(
    backend: Backend,
    queries: Sequence[Query],
    *,
    batch_size: int | None = None,
    distribution: bool = False,
    top_k: int | None = None,
    mix_lengths: bool = True,
    progress: Callable[[int], None] | None = None,
    features: bool = False,
) -> BatchOutput:
    """Run ``backend`` over ``queries`` in length-grouped batches; rows in input order.

    ``batch_size`` defaults to ``backend.batch_size``; ``progress`` is called with the number of
    queries finished after each batch; ``features`` asks the backend for each image's pooled
    vision features from the same pass (a backend that takes the argument).
    """
    extra = {"features": True} if features else {}
    if len(queries) == 0:
        raise ValueError("score() needs at least one query")
    collator = Collator(
        queries, backend.length_key, batch_size or backend.batch_size, mix_lengths=mix_lengths
    )
    outputs = []
    for batch in collator.batches():
        outputs.append(backend.forward(batch, distribution=distribution, top_k=top_k, **extra))
        if progress is not None:
            progress(len(batch))
    return collator.restore(outputs)


#: Per-field fill value when option-wide arrays of different widths are concatenated.
_OPTION_WIDE_FILL = {"option_logits": np.nan, "letter_counts": -1}


#: Fields only a batch with a sampled query has (the openai backend's sampling proxy), and
#: their value for a row that was not sampled: no letter counted (-1), nothing unparsed.
_SAMPLED_ONLY = {"letter_counts": -1, "n_unparsed": 0}


def _unsampled(name: str, output: BatchOutput) -> np.ndarray:
    rows, width = output.option_logits.shape
    shape = (rows, width) if name == "letter_counts" else (rows,)
    return np.full(shape, _SAMPLED_ONLY[name], dtype=np.int64)


def concat_outputs(outputs: Sequence[BatchOutput]) -> BatchOutput:
    """Stack batch outputs row-wise, padding option-wide arrays to the widest K."""
    if not outputs:
        raise ValueError("concat_outputs needs at least one BatchOutput")
    merged = {}
    for f in fields(BatchOutput):
        parts = [getattr(o, f.name) for o in outputs]
        present = [p is not None for p in parts]
        if not any(present):
            merged[f.name] = None
            continue
        if not all(present) and f.name in _SAMPLED_ONLY:  # a batch that sampled no query
            pairs = zip(outputs, parts, strict=True)
            parts = [_unsampled(f.name, o) if p is None else p for o, p in pairs]
        elif not all(present):
            raise ValueError(f"field {f.name!r} is set in some batch outputs but not in others")
        if f.name in _OPTION_WIDE_FILL:
            width = max(p.shape[1] for p in parts)
            fill = _OPTION_WIDE_FILL[f.name]
            parts = [
                np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=fill) for p in parts
            ]
        merged[f.name] = np.concatenate(parts, axis=0)
    return BatchOutput(**merged)


def take_rows(output: BatchOutput, rows: np.ndarray) -> BatchOutput:
    """The output restricted to (and reordered by) ``rows``."""
    return BatchOutput(
        **{
            f.name: (None if getattr(output, f.name) is None else getattr(output, f.name)[rows])
            for f in fields(BatchOutput)
        }
    )
