"""Cell matrices (the corruption x severity heatmaps, Fig. 7's family matrices) written straight
as SVG: one ``<rect>`` a cell, ``<text>`` labels, a colour bar. No matplotlib figure, layout
engine or renderer: those cost a report page most of its figures' CPU for what is a grid of
coloured boxes (benchmarks/bench_report.py, docs/measurements.md).

Colours come from matplotlib's colormap objects (``matplotlib.colormaps[name]`` over a
``Normalize(lo, hi)``: what ``imshow`` painted the cells with). Text widths are measured on the
font matplotlib draws with (DejaVu Sans, its advance widths, no kerning, which only narrows a
label), and the viewBox is the union of every drawn thing's box plus matplotlib's
``savefig.pad_inches`` margin, so no label lies outside the figure. Units are points (the
``<svg>`` is sized in ``pt``), the y axis pointing down. Every label and id is XML-escaped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import numpy as np

#: Margin around everything drawn, in points (matplotlib's ``savefig.pad_inches``, 0.1 in).
PAD = 7.2
#: Tick mark length and the gap between a tick mark and its label, in points (matplotlib's).
TICK_LEN = 3.5
TICK_PAD = 3.5
#: Gap between two panels, between a panel and the colour bar, and the colour bar's width.
PANEL_GAP = 10.0
BAR_GAP = 10.0
BAR_WIDTH = 11.0
#: The colour bar's height as a share of the panels' (matplotlib's ``shrink=0.9``).
BAR_SHRINK = 0.9
#: Colour stops of the colour bar's gradient (sRGB interpolation in between).
BAR_STOPS = 33
#: Line pitch of a two-line cell label, in font sizes.
CELL_LINE = 1.2
#: A frame's stroke width (a gated cell's status), in points.
FRAME_PT = 2.0
#: Width of the white rule between two row groups (families), in points.
RULE_PT = 2.5


# -- text metrics ------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Metrics:
    ascent: float  # em
    descent: float  # em, positive
    cap: float  # em: a digit's height, for centring a label on a cell
    family: str  # the CSS font-family list, matplotlib's


@lru_cache(maxsize=1)
def _font() -> tuple[Any, _Metrics]:
    import matplotlib
    from matplotlib.font_manager import FontProperties, findfont
    from matplotlib.ft2font import FT2Font

    font = FT2Font(findfont(FontProperties(family=["sans-serif"])))
    font.set_size(100.0, 72)
    em = font.units_per_EM
    digit = font.load_char(ord("0"))
    names = [*matplotlib.rcParams["font.sans-serif"]]
    family = ", ".join(n if n == "sans-serif" else f"'{n}'" for n in names)
    if "sans-serif" not in names:
        family += ", sans-serif"
    metrics = _Metrics(
        ascent=font.ascender / em,
        descent=-font.descender / em,
        cap=digit.height / 64 / 100,
        family=family,
    )
    return font, metrics


@lru_cache(maxsize=4096)
def _advance(ch: str) -> float:
    """A character's advance width, in em."""
    font, _ = _font()
    return font.load_char(ord(ch)).linearHoriAdvance / 65536 / 100


def metrics() -> _Metrics:
    return _font()[1]


def text_width(text: str, size: float) -> float:
    """``text``'s advance width at ``size`` points (DejaVu Sans, no kerning)."""
    return size * sum(_advance(c) for c in text)


# -- drawing -----------------------------------------------------------------------------------
def _n(x: float) -> str:
    """A coordinate, to 1/100 pt."""
    s = f"{x:.2f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


@dataclass
class Box:
    """The union of drawn things' boxes: the viewBox before its margin."""

    x0: float = math.inf
    y0: float = math.inf
    x1: float = -math.inf
    y1: float = -math.inf

    def add(self, x0: float, y0: float, x1: float, y1: float) -> None:
        self.x0, self.y0 = min(self.x0, x0), min(self.y0, y0)
        self.x1, self.y1 = max(self.x1, x1), max(self.y1, y1)


@dataclass
class Canvas:
    """SVG elements and the box they cover."""

    parts: list[str] = field(default_factory=list)
    box: Box = field(default_factory=Box)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: float,
        *,
        anchor: str = "middle",
        valign: str = "baseline",
        rotate: int = 0,
        fill: str | None = None,
    ) -> None:
        """A one-line label. ``x, y``: its anchor point (``anchor``: start, middle or end along
        the text's direction); ``valign``: where ``y`` (``x`` for a rotated label) sits on the
        line: its baseline, ``center`` (the middle of a digit's height), ``top`` or ``bottom``
        (the font's ascent or descent). ``rotate``: 0, 90 (reads downwards) or -90 (upwards)."""
        if not text:
            return
        m = metrics()
        asc, desc = m.ascent * size, m.descent * size
        shift = {"baseline": 0.0, "center": m.cap * size / 2, "top": asc, "bottom": -desc}[valign]
        width = text_width(text, size)
        lead = {"start": 0.0, "middle": width / 2, "end": width}[anchor]
        if rotate == 0:
            bx, by = x, y + shift
            self.box.add(bx - lead, by - asc, bx - lead + width, by + desc)
            where = f'x="{_n(bx)}" y="{_n(by)}"'
        elif rotate == 90:  # the glyphs' tops face +x
            bx, by = x - shift, y
            self.box.add(bx - desc, by - lead, bx + asc, by - lead + width)
            where = f'x="{_n(bx)}" y="{_n(by)}" transform="rotate(90 {_n(bx)} {_n(by)})"'
        elif rotate == -90:  # the glyphs' tops face -x
            bx, by = x + shift, y
            self.box.add(bx - asc, by + lead - width, bx + desc, by + lead)
            where = f'x="{_n(bx)}" y="{_n(by)}" transform="rotate(-90 {_n(bx)} {_n(by)})"'
        else:
            raise ValueError(f"rotate must be 0, 90 or -90, not {rotate}")
        style = f' text-anchor="{anchor}"' if anchor != "start" else ""
        colour = f' fill="{fill}"' if fill and fill != "black" else ""
        self.parts.append(
            f'<text {where} font-size="{_n(size)}"{style}{colour}>{escape(text)}</text>'
        )

    def raw(self, svg: str, x0: float, y0: float, x1: float, y1: float) -> None:
        self.parts.append(svg)
        self.box.add(x0, y0, x1, y1)


def colours(cmap: str, lo: float, hi: float, values: np.ndarray) -> np.ndarray:
    """RGBA rows for ``values`` on matplotlib's ``cmap`` over [lo, hi]: the colours ``imshow``
    painted the cells with (NaN gets the colormap's "bad" colour, transparent)."""
    import matplotlib
    from matplotlib.colors import Normalize

    return np.asarray(matplotlib.colormaps[cmap](Normalize(lo, hi)(values)), dtype=np.float64)


def hex_colour(rgba: Sequence[float]) -> str:
    r, g, b = (round(float(c) * 255) for c in rgba[:3])
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass
class Panel:
    """One matrix: ``values`` (rows x columns, NaN where undefined), each cell's label lines
    and their colour, each framed cell's frame colour, the panel's title lines and the SVG
    group id the panel is drawn in (None: none)."""

    values: np.ndarray
    labels: list[list[list[str]]]
    inks: list[list[str]]
    title: list[str]
    gid: str | None = None
    frames: dict[tuple[int, int], str] = field(default_factory=dict)


@dataclass
class Matrix:
    """A figure of side-by-side panels over the same rows and columns with one colour bar."""

    salt: str  # unique on the page: the colour bar gradient's id is made of it
    title: str
    panels: list[Panel]
    rows: list[str]
    columns: list[str]
    xlabel: str
    cmap: str
    lo: float
    hi: float
    bar_label: str
    #: Row groups (name, first row, end row): a white rule between two, names beside the last
    #: panel.
    groups: list[tuple[str, int, int]] = field(default_factory=list)
    panel_width: float = 190.0
    row_height: float = 32.0
    min_height: float = 64.0
    title_pt: float = 9.0
    label_pt: float = 7.5
    tick_pt: float = 7.0
    cell_pt: float = 8.0


def bar_ticks(lo: float, hi: float, length: float, tick_pt: float) -> tuple[list[float], int]:
    """The colour bar's ticks (matplotlib's: ``MaxNLocator`` with as many bins as labels twice
    their size fit along the bar, at most 9) and the decimals that print them all exactly."""
    from matplotlib.ticker import MaxNLocator

    nbins = int(np.clip(math.floor(length / (2 * tick_pt)), 1, 9))
    ticks = MaxNLocator(nbins=nbins, steps=[1, 2, 2.5, 5, 10]).tick_values(lo, hi)
    ticks = [float(t) for t in ticks if lo - 1e-9 <= t <= hi + 1e-9]
    digits = next(
        (d for d in range(4) if all(abs(round(t, d) - t) < 1e-9 for t in ticks)), 4
    )  # fmt: skip
    return ticks, max(digits, 1)


def tick_text(v: float, digits: int) -> str:
    """A colour bar's tick label as matplotlib prints it (a Unicode minus)."""
    s = f"{v:.{digits}f}"
    if s.startswith("-") and float(s) == 0:
        s = s[1:]
    return s.replace("-", "\u2212")


def render(fig: Matrix) -> str:
    """The figure as an inline ``<svg>`` element, sized in points to everything drawn."""
    c = Canvas()
    m = metrics()
    lay = _layout(fig, m)
    for p, (x0, panel) in enumerate(zip(lay.xs, fig.panels, strict=True)):
        open_g = f"<g id={quoteattr(panel.gid)}>" if panel.gid else "<g>"
        c.parts.append(open_g)
        _panel_cells(c, fig, panel, x0, lay)
        _panel_labels(c, fig, panel, x0, lay, row_names=p == 0)
        c.parts.append("</g>")

    right = lay.xs[-1] + lay.pw if lay.xs else lay.left
    if fig.groups:
        for name, start, end in fig.groups:
            c.text(right + 3.0, lay.top + (start + end) / 2 * lay.rh, name, fig.tick_pt,
                   rotate=90, valign="bottom")  # fmt: skip
        right += 3.0 + lay.line * fig.tick_pt
    _colour_bar(c, fig, right + BAR_GAP, lay.top, lay.ph)
    c.text((c.box.x0 + c.box.x1) / 2, PAD, fig.title, fig.title_pt, valign="top")
    return _svg(c, m.family)


@dataclass(frozen=True)
class _Layout:
    """Where :func:`render` draws, in points: computed once, before anything is drawn, so every
    panel, the group names and the colour bar agree on the same frame."""

    line: float  # a line's height, in font sizes (ascent + descent)
    pw: float  # a panel's width
    ph: float  # a panel's height
    cw: float  # a cell's width
    rh: float  # a row's height
    top: float  # the panels' top edge (under the title and the panel titles)
    bottom: float  # the panels' bottom edge
    left: float  # the first panel's left edge (right of the row labels and their ticks)
    xs: list[float]  # every panel's left edge


def _layout(fig: Matrix, m: _Metrics) -> _Layout:
    """The panels' frame: as wide as their titles and cell labels need, as tall as their rows
    (at least ``min_height``) and every row group's name, read downwards beside its rows."""
    n_rows, n_cols = len(fig.rows), len(fig.columns)
    line = m.ascent + m.descent
    # the panels' frame: as wide as their titles need, as tall as their rows (at least min)
    widest_title = max((text_width(t, fig.label_pt) for p in fig.panels for t in p.title),
                       default=0.0)  # fmt: skip
    widest_cell = max((text_width(t, fig.cell_pt) for p in fig.panels for row in p.labels
                       for lines in row for t in lines), default=0.0)  # fmt: skip
    pw = max(fig.panel_width, widest_title + 6.0, n_cols * (widest_cell + 4.0))
    ph = max(n_rows * fig.row_height, fig.min_height)
    # a row group's name, read downwards beside its rows, fits beside them
    for name, start, end in fig.groups:
        ph = max(ph, (text_width(name, fig.tick_pt) + 4.0) / max(1, end - start) * n_rows)
    cw, rh = pw / max(1, n_cols), ph / max(1, n_rows)
    n_title = max((len(p.title) for p in fig.panels), default=0)
    top = PAD + line * fig.title_pt + 6.0 + n_title * line * fig.label_pt + 6.0
    label_w = max((text_width(r, fig.tick_pt) for r in fig.rows), default=0.0)
    left = PAD + label_w + TICK_PAD + TICK_LEN
    xs = [left + p * (pw + PANEL_GAP) for p in range(len(fig.panels))]
    bottom = top + ph
    return _Layout(line=line, pw=pw, ph=ph, cw=cw, rh=rh, top=top, bottom=bottom, left=left,
                   xs=xs)  # fmt: skip


def _panel_cells(c: Canvas, fig: Matrix, panel: Panel, x0: float, lay: _Layout) -> None:
    """One panel's boxes: the coloured cells (none where undefined, so the white ground shows),
    the gated cells' frames, the white rules between row groups, the border and tick marks."""
    n_rows, n_cols = len(fig.rows), len(fig.columns)
    pw, ph, cw, rh, top, bottom = lay.pw, lay.ph, lay.cw, lay.rh, lay.top, lay.bottom
    rgba = colours(fig.cmap, fig.lo, fig.hi, panel.values)
    cells = []
    for r in range(n_rows):
        for j in range(n_cols):
            if not math.isnan(panel.values[r, j]):
                cells.append(
                    f'<rect x="{_n(x0 + j * cw)}" y="{_n(top + r * rh)}" width="{_n(cw)}" '
                    f'height="{_n(rh)}" fill="{hex_colour(rgba[r, j])}"/>'
                )
    c.raw(f'<rect x="{_n(x0)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}" '
          'fill="#ffffff"/>', x0, top, x0 + pw, bottom)  # fmt: skip
    c.parts.append('<g shape-rendering="crispEdges">' + "".join(cells) + "</g>")
    inset = FRAME_PT / 2
    for (r, j), colour in sorted(panel.frames.items()):
        c.parts.append(
            f'<rect x="{_n(x0 + j * cw + inset)}" y="{_n(top + r * rh + inset)}" '
            f'width="{_n(cw - FRAME_PT)}" height="{_n(rh - FRAME_PT)}" fill="none" '
            f'stroke="{colour}" stroke-width="{_n(FRAME_PT)}"/>'
        )
    for _, start, _ in fig.groups:
        if start:
            y = top + start * rh
            c.parts.append(f'<path d="M{_n(x0)} {_n(y)}H{_n(x0 + pw)}" stroke="#ffffff" '
                           f'stroke-width="{_n(RULE_PT)}"/>')  # fmt: skip
    c.parts.append(f'<rect x="{_n(x0)}" y="{_n(top)}" width="{_n(pw)}" height="{_n(ph)}" '
                   'fill="none" stroke="#000000" stroke-width="0.8"/>')  # fmt: skip
    ticks = [f"M{_n(x0 + (j + 0.5) * cw)} {_n(bottom)}v{_n(TICK_LEN)}" for j in range(n_cols)]
    ticks += [f"M{_n(x0)} {_n(top + (r + 0.5) * rh)}h{_n(-TICK_LEN)}" for r in range(n_rows)]
    c.raw(f'<path d="{"".join(ticks)}" stroke="#000000" stroke-width="0.8"/>',
          x0 - TICK_LEN, top, x0 + pw, bottom + TICK_LEN)  # fmt: skip


def _panel_labels(
    c: Canvas, fig: Matrix, panel: Panel, x0: float, lay: _Layout, *, row_names: bool
) -> None:
    """One panel's text: each cell's label lines centred on it, the row names (only beside
    the first panel: the panels share their rows), column names, axis label and title."""
    pw, cw, rh, top, bottom, line = lay.pw, lay.cw, lay.rh, lay.top, lay.bottom, lay.line
    for r in range(len(fig.rows)):
        for j in range(len(fig.columns)):
            lines = panel.labels[r][j]
            xc, yc = x0 + (j + 0.5) * cw, top + (r + 0.5) * rh
            pitch = CELL_LINE * fig.cell_pt
            for k, text in enumerate(lines):
                y = yc + (k - (len(lines) - 1) / 2) * pitch
                c.text(xc, y, text, fig.cell_pt, valign="center", fill=panel.inks[r][j])
    if row_names:
        for r, name in enumerate(fig.rows):
            c.text(x0 - TICK_LEN - TICK_PAD, top + (r + 0.5) * rh, name, fig.tick_pt,
                   anchor="end", valign="center")  # fmt: skip
    for j, name in enumerate(fig.columns):
        c.text(x0 + (j + 0.5) * cw, bottom + TICK_LEN + TICK_PAD, name, fig.tick_pt,
               valign="top")  # fmt: skip
    under = bottom + TICK_LEN + TICK_PAD + line * fig.tick_pt + 3.0
    c.text(x0 + pw / 2, under, fig.xlabel, fig.label_pt, valign="top")
    for k, text in enumerate(panel.title):
        y = top - 6.0 - (len(panel.title) - 1 - k) * line * fig.label_pt
        c.text(x0 + pw / 2, y, text, fig.label_pt, valign="bottom")


def _colour_bar(c: Canvas, fig: Matrix, x: float, top: float, ph: float) -> None:
    """The colour bar beside the panels: a gradient of the colormap, ticks, their labels and
    the bar's title, read upwards."""
    h = BAR_SHRINK * ph
    y0 = top + (ph - h) / 2
    gid = f"{fig.salt}-colour-bar"
    offsets = np.linspace(0.0, 1.0, BAR_STOPS)
    rgba = colours(fig.cmap, 0.0, 1.0, offsets)
    stops = "".join(
        f'<stop offset="{_n(o)}" stop-color="{hex_colour(col)}"/>'
        for o, col in zip(offsets, rgba, strict=True)
    )
    c.parts.append(
        f'<defs><linearGradient id={quoteattr(gid)} x1="0" y1="1" x2="0" y2="0">{stops}'
        "</linearGradient></defs>"
    )
    c.raw(f'<rect x="{_n(x)}" y="{_n(y0)}" width="{_n(BAR_WIDTH)}" height="{_n(h)}" '
          f'fill="url(#{escape(gid)})" stroke="#000000" stroke-width="0.8"/>',
          x, y0, x + BAR_WIDTH, y0 + h)  # fmt: skip
    ticks, digits = bar_ticks(fig.lo, fig.hi, h, fig.tick_pt)
    marks, widest = [], 0.0
    for t in ticks:
        y = y0 + h * (1 - (t - fig.lo) / (fig.hi - fig.lo))
        marks.append(f"M{_n(x + BAR_WIDTH)} {_n(y)}h{_n(TICK_LEN)}")
        text = tick_text(t, digits)
        c.text(x + BAR_WIDTH + TICK_LEN + TICK_PAD, y, text, fig.tick_pt, anchor="start",
               valign="center")  # fmt: skip
        widest = max(widest, text_width(text, fig.tick_pt))
    if marks:
        c.parts.append(f'<path d="{"".join(marks)}" stroke="#000000" stroke-width="0.8"/>')
    lx = x + BAR_WIDTH + TICK_LEN + TICK_PAD + widest + 4.0
    c.text(lx, y0 + h / 2, fig.bar_label, fig.label_pt, rotate=-90, valign="top")


def _svg(c: Canvas, family: str) -> str:
    b = c.box
    x, y = b.x0 - PAD, b.y0 - PAD
    w, h = b.x1 - b.x0 + 2 * PAD, b.y1 - b.y0 + 2 * PAD
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_n(w)}pt" height="{_n(h)}pt" '
        f'viewBox="{_n(x)} {_n(y)} {_n(w)} {_n(h)}" version="1.1" '
        f"style={quoteattr(f'font-family: {family}')}>"
    )
    backdrop = f'<rect x="{_n(x)}" y="{_n(y)}" width="{_n(w)}" height="{_n(h)}" fill="#ffffff"/>'
    return "\n".join([head, backdrop, *c.parts, "</svg>"])
