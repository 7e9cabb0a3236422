"""How the page writes a number: fixed digits, "n/a" when undefined (never 0); the templates
use ``f`` and ``pct`` as filters (escaping is jinja2's autoescape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def f(x: Any, digits: int = 3, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


#: The most digits :func:`moved` adds to tell two different values apart.
MOVED_MAX_DIGITS = 6


def moved(before: Any, after: Any, digits: int = 2) -> str:
    """``"0.10 → -0.40"``: a value's move, with as many digits (``digits`` up to
    ``MOVED_MAX_DIGITS``) as it takes for two different values not to read equal; equal ones
    say ``"0.50 (unchanged)"``."""
    if before is None or after is None:
        return f"{f(before, digits)} → {f(after, digits)}"
    if before == after:
        return f"{before:.{digits}f} (unchanged)"
    d = digits
    while d < MOVED_MAX_DIGITS and f"{before:.{d}f}" == f"{after:.{d}f}":
        d += 1
    return f"{before:.{d}f} → {after:.{d}f}"


def pct(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def reference_series(series: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The series every difference is taken against (one sign convention: candidate −
    baseline): the baseline's when there is one, else the first run's (a comparison reads the
    other runs against it); None with fewer than two series."""
    if len(series) < 2:
        return None
    return next((s for s in series if s.get("kind") == "baseline"), series[0])
