"""How the page writes a number: fixed digits, "n/a" when undefined (never 0); the templates
use ``f`` and ``pct`` as filters (escaping is jinja2's autoescape)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def f(x: Any, digits: int = 3, signed: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def pct(x: Any, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f}%"


def reference_series(series: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The series every difference is taken against (one sign convention: candidate −
    baseline): the baseline's when there is one, else the first run's (a comparison reads the
    other runs against it); None with fewer than two series."""
    if len(series) < 2:
        return None
    return next((s for s in series if s.get("kind") == "baseline"), series[0])
