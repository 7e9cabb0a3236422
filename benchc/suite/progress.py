"""A progress line for long runs: queries done / total, queries/s, ETA (tqdm's meter).

A 7B model's grid takes half an hour, one cell about 20 s, and pytest shows one dot per case.
On an interactive terminal a tqdm bar appears once the run has taken a few seconds (short runs
show nothing); where a bar would be garbage -- a CI log, an xdist worker (whose stderr several
processes share), ``-q`` -- a plain line every ``interval`` seconds. ``-qq`` or
``--progress=off`` silences it. Lines reach the terminal past pytest's output capture.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, TextIO

from tqdm import tqdm

#: ``--progress`` values.
MODES = ("auto", "bar", "log", "off")
#: Seconds before a bar appears, and between two log lines.
BAR_DELAY_S = 3.0
LOG_INTERVAL_S = 30.0
#: Where the lines go (None: the process's real stderr).
STREAM: TextIO | None = None


def resolve_mode(mode: str, *, verbosity: int, interactive: bool, worker: str | None) -> str:
    """``auto`` as ``bar`` on an interactive terminal without xdist at normal verbosity, ``log``
    under ``-q``, in an xdist worker or a non-interactive log, ``off`` under ``-qq``."""
    if mode != "auto":
        return mode
    if verbosity <= -2:
        return "off"
    if worker is not None or not interactive or verbosity < 0:
        return "log"
    return "bar"


class RunProgress:
    """Counts queries scored; shows a bar or writes lines through ``write`` (a callable taking
    one text, so the caller decides how to get past output capture)."""

    def __init__(
        self,
        total: int | None,
        *,
        mode: str,
        write: Callable[[str], None],
        prefix: str = "",
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if mode not in MODES[1:]:
            raise ValueError(f"progress mode must be one of {', '.join(MODES[1:])}, got {mode!r}")
        self.mode, self.total, self.write, self.prefix = mode, total, write, prefix
        self.interval = LOG_INTERVAL_S if interval is None else interval
        self.clock = clock
        self.done = 0
        self.started = clock()
        self._last_line = self.started
        self._bar: tqdm | None = None
        if mode == "bar":
            self._bar = tqdm(
                total=total,
                desc=f"{prefix}benchc queries",
                unit="q",
                delay=BAR_DELAY_S,
                file=_Writer(write),
                dynamic_ncols=True,
                leave=False,
            )

    def update(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self.mode == "log" and self.clock() - self._last_line >= self.interval:
            self._last_line = self.clock()
            self.write(self.line() + "\n")

    def line(self) -> str:
        """``benchc: 1,234/81,500 queries [02:03<2:10:00, 10.0 q/s]`` (no ETA without a total)."""
        meter = tqdm.format_meter(
            self.done,
            self.total,
            self.clock() - self.started,
            unit="q",
            bar_format="{n_fmt}/{total_fmt} queries [{elapsed}<{remaining}, {rate_fmt}]"
            if self.total
            else "{n_fmt} queries [{elapsed}, {rate_fmt}]",
        )
        return f"{self.prefix}benchc: {meter}"

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class _Writer:
    """A file-like object for tqdm that hands each write to a callable."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self._write = write

    def write(self, text: str) -> None:
        self._write(text)

    def flush(self) -> None:
        pass


#: While a suite case runs: its ``capsys.disabled`` (pytest's public way past output capture,
#: set by the ``benchc_gate`` fixture); None between cases.
_UNCAPTURED: list[Callable[[], AbstractContextManager[None]]] = []


@contextmanager
def uncaptured_by(disabled: Callable[[], AbstractContextManager[None]]) -> Iterator[None]:
    """Within the block, progress lines go to the terminal through ``disabled()`` (a case's
    ``capsys.disabled``): the cells compute inside test calls, whose output pytest captures."""
    _UNCAPTURED.append(disabled)
    try:
        yield
    finally:
        _UNCAPTURED.remove(disabled)


def terminal_writer(config: Any, stream: TextIO | None = None) -> Callable[[str], None]:
    """Writes to the real stderr, past pytest's capture while a suite case runs
    (:func:`uncaptured_by`); outside one (a session fixture's setup) the line is captured with
    that phase's output."""

    def write(text: str) -> None:
        out = stream or STREAM or sys.__stderr__
        with _UNCAPTURED[-1]() if _UNCAPTURED else nullcontext():
            out.write(text)
            out.flush()

    return write


def for_session(
    config: Any, mode: str, total: int | None, worker: str | None
) -> RunProgress | None:
    """The session's progress (None when off), ``mode`` from ``--progress``."""
    interactive = bool(getattr(sys.__stderr__, "isatty", lambda: False)())
    resolved = resolve_mode(
        mode,
        verbosity=config.getoption("verbose", 0) or 0,
        interactive=interactive,
        worker=worker,
    )
    if resolved == "off":
        return None
    prefix = f"[{worker}] " if worker else ""
    return RunProgress(total, mode=resolved, write=terminal_writer(config), prefix=prefix)
