"""Batch k+1's inputs built while batch k runs: the suite's input pipeline.

A GPU (or a server) leaves this machine's cores idle while it computes; building the next
batch (cache reads, rendering, the processor, the dtype cast, the copy to the device) on the
main thread in between leaves the device idle instead (0.64 of the wall time busy on 2 cores,
docs/guides/gpu.md). Here a chunk is planned and its batches prepared in background threads,
one chunk ahead, across chunk and condition boundaries; the model runs on the caller's thread.

The batches, their order and the code that builds each are those of
:func:`benchc.models.collate.score`, so every number is the same with or without the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.collate import Collator

#: What identifies a chunk: (condition key, first row, stop row).
ChunkId = tuple[str, int, int]


@dataclass
class Chunk:
    """One stored chunk's queries, its batch plan and each batch's prepared inputs (futures
    when built ahead)."""

    collator: Collator
    prepared: list[Future | _Lazy]
    #: Anything the builder returns beside the queries (the cache's PNG bytes, ...).
    extra: Any = None

    def run(
        self,
        backend: Backend,
        *,
        progress: Callable[[int], None] | None = None,
        **kwargs: Any,
    ) -> BatchOutput:
        """Score the chunk batch by batch (in the collator's order), rows in input order."""
        outputs = []
        for i, item in enumerate(self.prepared):
            batch = item.result()  # a Future, or a batch prepared now (_Lazy)
            self.prepared[i] = None  # release the inputs once they ran
            outputs.append(backend.forward_prepared(batch, **kwargs))
            if progress is not None:
                progress(len(self.collator.plan[i]))
        return self.collator.restore(outputs)

    def cancel(self, backend: Backend) -> None:
        """Drop the batches not run yet; what their preparation started, ``backend`` releases."""
        for item in self.prepared:
            if isinstance(item, Future) and not item.cancel():
                if item.exception() is None:  # let it finish: no build outlives its owner
                    backend.release(item.result())


class Lookahead:
    """Chunks built ahead in threads: one plans a chunk (reads its images, keys its queries),
    ``workers`` prepare its batches (more than one only for processors that release the GIL or
    run in worker processes)."""

    def __init__(self, backend: Backend, batch_size: int, *, workers: int = 1) -> None:
        self.backend = backend
        self.batch_size = batch_size
        self.workers = max(1, workers)
        self._planner: ThreadPoolExecutor | None = None
        self._preparers: ThreadPoolExecutor | None = None
        self._ahead: dict[ChunkId, Future] = {}

    def _plan(self, queries: Sequence[Query], extra: Any, *, ahead: bool) -> Chunk:
        collator = Collator(queries, self.backend.length_key, self.batch_size)
        batches = collator.batches()
        if ahead:
            pool = self._pool()
            prepared: list = [pool.submit(self.backend.prepare, b) for b in batches]
        else:  # inline: each batch is prepared when it runs, as a plain loop does
            prepared = [_Lazy(self.backend, b) for b in batches]
        return Chunk(collator, prepared, extra)

    def _pool(self) -> ThreadPoolExecutor:
        if self._preparers is None:
            self._preparers = ThreadPoolExecutor(self.workers, thread_name_prefix="benchc-prepare")
        return self._preparers

    def schedule(self, ident: ChunkId, build: Callable[[], tuple[Sequence[Query], Any]]) -> None:
        """Start building chunk ``ident`` (``build()``: its queries and extras) in the
        background, unless it is already under way."""
        if ident in self._ahead:
            return
        if self._planner is None:
            self._planner = ThreadPoolExecutor(1, thread_name_prefix="benchc-plan")

        def job() -> Chunk:
            queries, extra = build()
            return self._plan(queries, extra, ahead=True)

        self._ahead[ident] = self._planner.submit(job)

    def take(
        self,
        ident: ChunkId,
        build: Callable[[], tuple[Sequence[Query], Any]],
        *,
        ahead: bool = False,
    ) -> Chunk:
        """Chunk ``ident``: the one built ahead, else built now on this thread -- its batches
        then prepared in the background one ahead of the one running when ``ahead`` (the
        first chunk of a pipelined run), else each when it runs."""
        pending = self._ahead.pop(ident, None)
        if pending is not None:
            return pending.result()
        queries, extra = build()
        return self._plan(queries, extra, ahead=ahead)

    def discard(self, keep: Callable[[ChunkId], bool] = lambda ident: False) -> None:
        """Drop the chunks built ahead that ``keep`` rejects (all by default), waiting for any
        build in progress."""
        for ident in [i for i in self._ahead if not keep(i)]:
            future = self._ahead.pop(ident)
            if future.cancel():
                continue
            try:
                future.result().cancel(self.backend)
            except Exception:  # a failed build ahead: the chunk, when needed, reports it
                pass

    def close(self) -> None:
        self.discard()
        for pool in (self._planner, self._preparers):
            if pool is not None:
                pool.shutdown(wait=True)
        self._planner = self._preparers = None

    def pending(self) -> list[Hashable]:
        return list(self._ahead)


class _Lazy:
    """A batch prepared only when it runs (the inline path)."""

    __slots__ = ("backend", "batch")

    def __init__(self, backend: Backend, batch: list[Query]) -> None:
        self.backend = backend
        self.batch = batch

    def result(self) -> Any:
        return self.backend.prepare(self.batch)
