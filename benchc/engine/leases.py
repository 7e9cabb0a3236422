"""The driver's queue of missing chunks: leased in short runs per entry, lost ones taken back.

Pure bookkeeping (no Ray), so the rules are unit-tested without a cluster: a chunk is leased to
one holder at a time; a holder that dies gives its unreturned chunks back to the front of the
queue (counted as redone); a chunk returned twice is a harmless duplicate (same bytes) and
is counted, not stored again; a chunk lost too often stops the run instead of looping forever.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from dataclasses import dataclass

from benchc.engine import EngineError

#: Times one chunk may be lost (its holder died) before the run stops.
MAX_LOSSES = 3


@dataclass(frozen=True, order=True)
class ChunkRef:
    """One chunk: which of the session's runs (``grid``, ``vsi``), its entry, its rows."""

    run: str
    name: str
    start: int
    stop: int

    def __str__(self) -> str:
        return f"{self.name}[{self.start}:{self.stop}]"


class LostTooOften(EngineError):
    """A chunk's holders kept dying on it."""


class LeaseQueue:
    """Missing chunks in plan order; :meth:`lease` hands out up to ``run_length`` consecutive
    chunks of one entry (an actor reads one condition's images in a row)."""

    def __init__(self, chunks: Iterable[ChunkRef], *, run_length: int = 2) -> None:
        if run_length < 1:
            raise ValueError(f"run_length must be >= 1, got {run_length}")
        self.run_length = run_length
        self._todo: deque[ChunkRef] = deque(dict.fromkeys(chunks))
        self._out: dict[ChunkRef, Hashable] = {}
        self._done: set[ChunkRef] = set()
        self._losses: dict[ChunkRef, int] = {}
        #: Chunks leased again after their holder died.
        self.redone = 0
        #: Chunks returned after they were stored already (dropped).
        self.duplicates = 0

    def lease(self, holder: Hashable) -> list[ChunkRef]:
        """The next run of chunks for ``holder`` (empty when none is left to lease)."""
        out: list[ChunkRef] = []
        while self._todo and len(out) < self.run_length:
            chunk = self._todo[0]
            if out and (chunk.run, chunk.name) != (out[0].run, out[0].name):
                break
            self._todo.popleft()
            if chunk in self._done:
                continue
            self._out[chunk] = holder
            out.append(chunk)
        return out

    def done(self, chunk: ChunkRef) -> bool:
        """Record ``chunk`` as returned; False when it had been returned before."""
        self._out.pop(chunk, None)
        if chunk in self._done:
            self.duplicates += 1
            return False
        self._done.add(chunk)
        return True

    def give_back(self, chunk: ChunkRef) -> None:
        """``chunk``'s holder died before returning it: it goes to the front of the queue."""
        if chunk in self._done or self._out.pop(chunk, None) is None:
            return
        lost = self._losses[chunk] = self._losses.get(chunk, 0) + 1
        if lost > MAX_LOSSES:
            raise LostTooOften(
                f"chunk {chunk} was lost {lost} times (its actor died each time: host memory, "
                "a crashing kernel?); see the actors' logs under /tmp/ray/session_latest/logs"
            )
        self._todo.appendleft(chunk)
        self.redone += 1

    def held_by(self, holder: Hashable) -> list[ChunkRef]:
        return [c for c, h in self._out.items() if h == holder]

    def left(self, run: str, name: str) -> int:
        """Chunks of entry ``name`` not returned yet."""
        return sum(1 for c in (*self._todo, *self._out) if (c.run, c.name) == (run, name))

    @property
    def finished(self) -> bool:
        return not self._todo and not self._out

    @property
    def stored(self) -> int:
        return len(self._done)
