"""The page's jinja2 environment: templates in ``benchc/report/templates/``, every value
autoescaped (the inline SVG and data URIs benchc itself draws come in as ``Markup``), a name the
template lacks an error rather than an empty string."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined
from jinja2.ext import Extension

from benchc.report.fmt import f, moved, pct


class JoinLines(Extension):
    """Templates are written one element a line, indented; the page keeps no whitespace between
    elements (a table cell's text is what it was): each template line loses its indentation and
    its newline, and ``{{ nl }}`` writes a newline where the page has one."""

    def preprocess(self, source: str, name: str | None, filename: str | None = None) -> str:
        return "".join(line.lstrip() for line in source.splitlines())


def _g2(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2g}"


def _bar_pct(x: float | None) -> int:
    """A probability bar's width in % of its column (Python's rounding, not jinja's)."""
    return max(1, round(100 * (x or 0)))


@cache
def environment() -> Environment:
    env = Environment(
        loader=PackageLoader("benchc.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        extensions=[JoinLines],
    )
    env.filters.update(
        f=f, pct=pct, moved=moved, g2=_g2, letter=lambda k: chr(65 + k), bar_pct=_bar_pct
    )
    env.globals["nl"] = "\n"
    return env
