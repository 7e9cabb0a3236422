"""How the page writes a value: HTML-escaped text and fixed-digit numbers ("n/a" when
undefined, never 0)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any


def e(x: Any) -> str:
    return html.escape(str(x), quote=True)


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
