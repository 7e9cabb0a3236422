"""Report plots: the report document's numbers drawn as inline SVG with matplotlib; the
cell matrices (the corruption x severity heatmaps, Fig. 7's family matrices) written straight
as SVG by :mod:`benchc.report.svgmatrix`, in matplotlib's colormap colours (:data:`DIRECT_SVG`).

Every function takes the document built by :mod:`benchc.report.data` and plots only what it
holds, the first series solid and every other series (the baseline, or the runs compared)
overlaid dashed, so a figure and ``report.json`` cannot disagree. Output is deterministic
(fixed SVG hash salt, no date), so the same run gives a byte-identical page.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np
from markupsafe import Markup

from benchc import spec
from benchc.report import svgmatrix
from benchc.report.fmt import reference_series

#: Smallest font of any figure text, in points. The page shows every figure at its own size
#: (1 pt = 4/3 px; a figure wider than the screen scrolls inside its frame), so no label is
#: under 9.3 px on any screen.
MIN_PT = 7.0
TICK_PT = MIN_PT
LABEL_PT = 7.5
TITLE_PT = 9.0
#: Font size of a heatmap cell's label (its value, and its change under a candidate).
HEAT_LABEL_PT = 8.0
#: One colour per series, first = the run under report.
PALETTE = ("#1f77b4", "#222222", "#d62728", "#2ca02c", "#9467bd", "#8c564b")
#: A series' marker as a text glyph (for annotations that name a series by its marker).
MARKER_GLYPHS = {"o": "●", "s": "■"}
STATUS_COLOURS = {"fail": "#d62728", "improved": "#2ca02c", "pass": "#bbbbbb"}
STATE_LABELS = {
    "cc": "Q_cc (stays correct)",
    "cw": "Q_cw (correct → wrong)",
    "wc": "Q_wc (wrong → correct)",
    "ww": "Q_ww (stays wrong)",
}
TRAJECTORY_LABELS = {
    "always_correct": "always correct",
    "transient_loss": "transient loss",
    "persistent_loss": "persistent loss",
    "always_wrong": "always wrong",
    "transient_correction": "transient corr.",
    "persistent_correction": "persistent corr.",
}
_TRAJECTORY_COLOURS = ("#4c9f70", "#f2b134", "#d1495b", "#7f7f7f", "#86bbd8", "#33658a")

#: While :func:`figures` runs: the drawn figures by id, kept open instead of written as SVG.
_KEEP: ContextVar[dict[str, Any] | None] = ContextVar("benchc_keep_figures", default=None)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _subplots(nrows: int, ncols: int, figsize: tuple[float, float], **kw: Any) -> tuple[Any, Any]:
    """A figure laid out by matplotlib's constrained layout: the title above every panel
    title, legends placed "outside" beside the panels rather than over them, colour bars
    and labels clear of each other."""
    return _plt().subplots(nrows, ncols, figsize=figsize, squeeze=False, layout="constrained", **kw)


def _svg(fig: Any, salt: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), deterministic, cropped to
    everything drawn (``bbox_inches="tight"``'s box) so no label is clipped.

    Drawn once: ``savefig(bbox_inches="tight")`` draws a laid-out figure twice (a dry pass for
    the layout and the box, then the SVG); here the constrained layout runs inside the one SVG
    draw, the box is measured on that layout, and the ``<svg>`` element's viewport is set to it
    (with the figure's face colour behind it, as a cropped figure has)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.colors import to_hex

    keep = _KEEP.get()
    if keep is not None:
        keep[salt] = fig
        return ""
    plt = _plt()
    buf = io.StringIO()
    drawn_with = []
    draw = fig.draw

    def draw_and_keep(renderer: Any) -> None:
        drawn_with.append(renderer)
        draw(renderer)

    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"benchc-{salt}"}):
        fig.draw = draw_and_keep
        try:  # the layout engine runs inside this draw
            FigureCanvasSVG(fig).print_svg(buf, metadata={"Date": None})
        finally:
            del fig.draw
        fig.set_layout_engine("none")  # laid out: measuring the box must not move anything
        box = fig.get_tightbbox(drawn_with[0]).padded(matplotlib.rcParams["savefig.pad_inches"])
        height = fig.get_figheight()
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    if start >= 0 and end > start:  # RDF boilerplate: bytes, and URLs a browser never needs
        text = text[:start] + text[end + len("</metadata>") :]
    x, y = 72 * box.x0, 72 * (height - box.y1)  # points, the SVG's y axis pointing down
    w, h = 72 * box.width, 72 * box.height
    head_end = text.index(">") + 1
    head = re.sub(
        r' width="[^"]*" height="[^"]*" viewBox="[^"]*"',
        f' width="{w:g}pt" height="{h:g}pt" viewBox="{x:g} {y:g} {w:g} {h:g}"',
        text[:head_end],
        count=1,
    )
    face = to_hex(fig.get_facecolor(), keep_alpha=True)
    backdrop = f'\n <rect x="{x:g}" y="{y:g}" width="{w:g}" height="{h:g}" style="fill: {face}"/>'
    return head + backdrop + text[head_end:]


def _style(i: int) -> dict[str, Any]:
    return {
        "color": PALETTE[i % len(PALETTE)],
        "linestyle": "-" if i == 0 else "--",
        "linewidth": 1.8 if i == 0 else 1.3,
        "marker": "o" if i == 0 else "s",
        "markersize": 3.5 if i == 0 else 3,
    }


def _v(x: Any) -> float:
    return float("nan") if x is None else float(x)


def cell_text(v: float, signed: bool = False) -> str:
    """A number printed inside a figure: two decimals; a value that would print as 0.00 but is
    not 0 with its one significant digit (never a "+0.00" that hides a change); 0 as "0"."""
    if v == 0:
        return "0"
    if abs(v) >= 0.005:
        return f"{v:+.2f}" if signed else f"{v:.2f}"
    return f"{v:+.1g}" if signed else f"{v:.1g}"


def ink(rgba: tuple[float, ...]) -> str:
    """Black or white, whichever contrasts more with a cell's colour (WCAG relative luminance):
    at least 4.6:1 on any colour of the scale."""

    def lin(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    lum = 0.2126 * lin(rgba[0]) + 0.7152 * lin(rgba[1]) + 0.0722 * lin(rgba[2])
    return "black" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "white"


def _ticks(ax: Any) -> None:
    ax.tick_params(labelsize=TICK_PT)


# -- corruption x severity heatmaps -----------------------------------------------------------
#: Signed alignment figures: their colour scales are centred on 0 (white = no change).
SIGNED = ("ras", "r_c", "r_w")
#: A heatmap's colour bar title, by figure.
HEAT_LABELS = {
    "ras": "mean RAS (white: 0)",
    "accuracy": "accuracy",
    "r_c": "R_c (white: 0)",
    "r_w": "R_w (white: 0)",
}


def heat_limits(figure: str, series: list[dict[str, Any]]) -> tuple[float, float]:
    """A heatmap's colour range: [0, 1] for a share; for a signed figure symmetric about 0,
    wide enough for every series' cells (at least ±0.2, in steps of 0.1)."""
    if figure not in SIGNED:
        return 0.0, 1.0
    vals = [_v(v) for s in series for v in s["cells"][figure].values()]
    top = max((abs(v) for v in vals if not math.isnan(v)), default=0.2)
    hi = math.ceil(max(top, 0.2) * 10 - 1e-9) / 10
    return -hi, hi


def heatmap(doc: dict[str, Any], figure: str, title: str) -> str:
    """One panel per series: rows = corruptions grouped by family, columns = severities.

    The first panel's cells carry the gate status as a coloured frame and, when a second
    series exists, its value's change from that series under the value (none where it is
    exactly 0). Each label is black or white by its cell's luminance. Written straight as SVG
    (:mod:`benchc.report.svgmatrix`); each panel's group has id ``heat-<figure>-<index>``.
    """
    axes_info = doc["axes"]
    fams = axes_info["families"]
    rows = [c for f in fams for c in fams[f]]
    sevs = axes_info["severities"]
    series = [s for s in doc["series"] if s.get("cells") and s["cells"].get(figure)]
    lo, hi = heat_limits(figure, series)
    cmap = "RdBu" if figure in SIGNED else "viridis"
    status = doc.get("cell_status", {})
    base = reference_series(series)
    ref = base["cells"][figure] if base is not None else None
    panels = [
        _heat_panel(figure, p, s, (rows, sevs), (cmap, lo, hi),
                    status, None if s is base else ref)
        for p, s in enumerate(series)
    ]  # fmt: skip
    return svgmatrix.render(
        svgmatrix.Matrix(
            salt=f"heat-{figure}",
            title=title,
            panels=panels,
            rows=rows,
            columns=[str(x) for x in sevs],
            xlabel="severity",
            cmap=cmap,
            lo=lo,
            hi=hi,
            bar_label=HEAT_LABELS.get(figure, figure),
            groups=_family_groups(fams),
            panel_width=190.0,
            title_pt=TITLE_PT,
            label_pt=LABEL_PT,
            tick_pt=TICK_PT,
            cell_pt=HEAT_LABEL_PT,
        )
    )


def _heat_panel(
    figure: str,
    p: int,
    s: dict[str, Any],
    grid: tuple[list[str], list[Any]],
    scale: tuple[str, float, float],
    status: dict[str, str],
    ref: dict[str, Any] | None,
) -> svgmatrix.Panel:
    """Series ``s``'s heatmap panel: each cell's value and, against ``ref`` (the reference
    series' cells; None for the reference itself), its change under it; a frame in the gate's
    colour on a failed or improved cell of the first panel (``p`` 0: the run under report)."""
    rows, sevs = grid
    cmap, lo, hi = scale
    vals = s["cells"][figure]
    m = np.array([[_v(vals.get(f"{c}-{sev}")) for sev in sevs] for c in rows], dtype=np.float64)
    rgba = svgmatrix.colours(cmap, lo, hi, m)
    labels, inks, frames = [], [], {}
    for r, c in enumerate(rows):
        labels.append([])
        inks.append([])
        for j, sev in enumerate(sevs):
            key = f"{c}-{sev}"
            v = m[r, j]
            lines = ["–" if math.isnan(v) else cell_text(v)]
            if ref is not None and ref.get(key) is not None:
                d = v - ref[key]
                if not math.isnan(v) and d != 0:  # candidate − baseline, under its value
                    lines.append(cell_text(d, signed=True))
            labels[r].append(lines)
            inks[r].append("black" if math.isnan(v) else ink(tuple(rgba[r, j])))
            st = status.get(key) if p == 0 else None
            if st in ("fail", "improved"):
                frames[(r, j)] = STATUS_COLOURS[st]
    return svgmatrix.Panel(m, labels, inks, [s["label"]], gid=f"heat-{figure}-{p}",
                           frames=frames)  # fmt: skip


def _family_groups(fams: dict[str, list[str]]) -> list[tuple[str, int, int]]:
    """The heatmap's row groups: each family's (name, first row, end row), rows being the
    corruptions family by family."""
    groups, start = [], 0
    for fam in fams:
        groups.append((fam, start, start + len(fams[fam])))
        start += len(fams[fam])
    return groups


def _finite(values: Any) -> bool:
    return bool(np.isfinite(np.asarray([_v(x) for x in values], dtype=np.float64)).any())


def _not_drawn(what: list[str]) -> str:
    """A note under a figure naming the panels it leaves out (nothing defined to draw)."""
    if not what:
        return ""
    return str(
        Markup('<p class="note fig-note">Not drawn (undefined in every cell): {}.</p>').format(
            "; ".join(what)
        )
    )


# -- Fig. 7: severity trajectories per family -------------------------------------------------
def severity(doc: dict[str, Any]) -> str:
    """Per family, R_c, R_w and RAS by severity (Bench-C Fig. 7), every series overlaid; a
    family no series has a defined value for is left out (and named under the figure)."""
    every = list(doc["axes"]["families"])
    sevs = doc["axes"]["severities"]

    def rows(fam: str) -> list[tuple[int, dict[str, Any], str, str, list[Any]]]:
        out = []
        for i, s in enumerate(doc["series"]):
            fam_vals = s.get("families") or {}
            for fig_name, marker in (("r_c", "o"), ("r_w", "^"), ("ras", "s")):
                row = (fam_vals.get(fig_name) or {}).get(fam)
                if row and _finite(row):
                    out.append((i, s, fig_name, marker, row))
        return out

    fams = [f for f in every if rows(f)]
    n = max(1, len(fams))
    fig, axes = _subplots(1, n, (0.6 + 2.3 * n, 3.0), sharey=True)
    for ax, fam in zip(axes[0], fams, strict=False):
        for i, s, fig_name, marker, row in rows(fam):
            st = _style(i)
            st["marker"] = marker
            ax.plot(sevs, [_v(x) for x in row], label=f"{fig_name} {s['label']}", **st)
        ax.axhline(0, color="#999999", lw=0.6)
        ax.set_title(fam, fontsize=LABEL_PT)
        ax.set_xticks(sevs)
        _ticks(ax)
        ax.set_xlabel("severity", fontsize=LABEL_PT)
    axes[0][0].set_ylabel("R_c (o)  R_w (^)  RAS (s)", fontsize=LABEL_PT)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, fontsize=TICK_PT, loc="outside lower center", ncol=3)
    fig.suptitle("Severity trajectories per family (Bench-C Fig. 7)", fontsize=TITLE_PT)
    return _svg(fig, "severity") + _not_drawn([f for f in every if f not in fams])


#: Fig. 7's matrices, side by side: (figure, panel title). One scale and colour map for both, so
#: a clean-wrong gain reads against the clean-correct cost it comes with (Bench-C Sec. VII-E).
FAMILY_MATRICES = (("r_c", "R_c (clean-correct)"), ("r_w", "R_w (clean-wrong)"))
#: The matrices' symmetric colour range (signed RAS).
FAMILY_RANGE = 0.6


def family_matrix(
    doc: dict[str, Any], figures: tuple[tuple[str, str], ...] = FAMILY_MATRICES
) -> str:
    """Signed source RAS by family and severity: R_c beside R_w for every series (the
    matrices of Bench-C Fig. 7), one shared scale and colour bar. A matrix undefined in every
    cell (no such pairs) is no blank panel: it is left out and named under the figure.

    Each panel's SVG group has id ``family-<figure>-<series index>`` so a test can read one
    matrix's numbers back from the page.
    """
    fams = list(doc["axes"]["families"])
    sevs = doc["axes"]["severities"]
    candidates = [
        (k, s, fig_name, name)
        for k, s in enumerate(doc["series"])
        for fig_name, name in figures
        if (s.get("families") or {}).get(fig_name)
    ]
    panels, empty = [], []
    for k, s, fig_name, name in candidates:
        fam_rows = s["families"][fig_name]
        defined = any(_finite(fam_rows.get(f) or []) for f in fams)
        (panels if defined else empty).append((k, s, fig_name, name))
    drawn = []
    for k, s, fig_name, name in panels:
        fam_rows = s["families"][fig_name]
        m = np.array([[_v(x) for x in fam_rows.get(f) or [None] * len(sevs)] for f in fams],
                     dtype=np.float64).reshape(len(fams), len(sevs))  # fmt: skip
        rgba = svgmatrix.colours("RdBu", -FAMILY_RANGE, FAMILY_RANGE, m)
        labels = [[[] if math.isnan(v) else [cell_text(v, signed=True)] for v in row] for row in m]
        inks = [[ink(tuple(rgba[r, j])) for j in range(m.shape[1])] for r in range(m.shape[0])]
        drawn.append(svgmatrix.Panel(m, labels, inks, [name, s["label"]],
                                     gid=f"family-{fig_name}-{k}"))  # fmt: skip
    svg = svgmatrix.render(
        svgmatrix.Matrix(
            salt="family-matrix",
            title="R_c and R_w by family and severity (Bench-C Fig. 7)",
            panels=drawn,
            rows=fams,
            columns=[str(x) for x in sevs],
            xlabel="severity",
            cmap="RdBu",
            lo=-FAMILY_RANGE,
            hi=FAMILY_RANGE,
            bar_label="signed RAS (white: 0)",
            panel_width=155.0,
            title_pt=TITLE_PT,
            label_pt=LABEL_PT,
            tick_pt=TICK_PT,
            cell_pt=TICK_PT,
        )
    )
    return svg + _not_drawn([f"{n} of {s['label']}" for _, s, _, n in empty])


# -- Fig. 5: the RAS component plane by correctness state -------------------------------------
#: Gap between two lines of a panel's mean-RAS lines under its axis, in points.
PLANE_LINE_PT = 10.0


def component_plane(doc: dict[str, Any]) -> str:
    """Per state, the first series' (ΔS, ΔC) density, every series' state mean as a marker
    and the other series' densities as contours (Bench-C Fig. 5); under each panel, one line a
    series in its colour and marker: the state's mean RAS and pair count."""
    planes = [(i, s) for i, s in enumerate(doc["series"]) if s.get("plane")]
    if not planes:
        return str(Markup('<p class="note fig-note">Component plane (Bench-C Fig. 5) not drawn: '
                          "no series holds per-pair arrays.</p>"))  # fmt: skip
    fig, axes = _subplots(1, 4, (10.5, 3.0 + 0.14 * len(planes)), sharey=True)
    edges = np.asarray(planes[0][1]["plane"]["edges"], dtype=np.float64)
    centres = (edges[:-1] + edges[1:]) / 2
    for ax, state in zip(axes[0], STATE_LABELS, strict=True):
        for line, (i, s) in enumerate(planes):
            _plane_series(ax, state, line, i, s, i == planes[0][0], centres)
        _plane_frame(ax, state)
    axes[0][0].set_ylabel("ΔC", fontsize=LABEL_PT)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, fontsize=TICK_PT, loc="outside lower center",
                   ncol=len(handles))  # fmt: skip
    fig.suptitle("RAS component plane by correctness state (Bench-C Fig. 5)", fontsize=TITLE_PT)
    return _svg(fig, "plane")


def _plane_series(
    ax: Any, state: str, line: int, i: int, s: dict[str, Any], first: bool, centres: np.ndarray
) -> None:
    """Series ``s`` (index ``i``, the ``line``-th with a plane) in one state's panel: its
    density, its state mean as a marker (legend entry in the first panel only) and its mean-RAS
    line under the axis, in its colour and marker."""
    st = s["plane"]["states"][state]
    dens = np.asarray(st["density"], dtype=np.float64).T  # rows ΔC, cols ΔS
    _plane_density(ax, dens, first, _style(i)["color"], centres)
    if st["mean_d_s"] is not None and st["mean_d_c"] is not None:
        ax.plot(
            st["mean_d_s"],
            st["mean_d_c"],
            marker=_style(i)["marker"],
            ms=6,
            color=_style(i)["color"],
            mec="white",
            ls="none",
            label=f"state mean: {s['label']}" if state == "cc" else None,
        )
    r = st["mean_ras"]
    glyph = MARKER_GLYPHS.get(_style(i)["marker"], "")
    ax.annotate(
        f"{glyph} RAS {'n/a' if r is None else f'{r:+.3f}'} (n={st['n']})",
        xy=(0.5, 0),
        xycoords="axes fraction",
        xytext=(0, -30 - PLANE_LINE_PT * line),
        textcoords="offset points",
        ha="center",
        va="top",
        fontsize=TICK_PT,
        color=_style(i)["color"],
    )


def _plane_density(
    ax: Any, dens: np.ndarray, first: bool, colour: str, centres: np.ndarray
) -> None:
    """A state's (ΔS, ΔC) density on a log scale: the first series' as the grey image under
    everything, another series' as dashed contours in its colour (none where it is empty)."""
    if first:
        ax.imshow(
            np.log1p(dens),
            origin="lower",
            extent=(-1, 1, -1, 1),
            cmap="Greys",
            aspect="auto",
            interpolation="nearest",
        )
    elif dens.sum() > 0:
        ax.contour(
            centres,
            centres,
            np.log1p(dens),
            levels=3,
            colors=colour,
            linewidths=0.8,
            linestyles="--",
        )


def _plane_frame(ax: Any, state: str) -> None:
    """A state panel's axes: zero lines, the [-1, 1] square, title, ticks and ΔS label."""
    ax.axhline(0, color="#888888", lw=0.5)
    ax.axvline(0, color="#888888", lw=0.5)
    ax.set_xlim(-1, 1)
    ax.set_ylim(-1, 1)
    ax.set_title(STATE_LABELS[state], fontsize=LABEL_PT)
    ax.set_xlabel("ΔS", fontsize=LABEL_PT)
    ax.set_xticks([-0.5, 0, 0.5])  # none at the edges: they would touch the next panel's
    ax.set_yticks([-1, -0.5, 0, 0.5, 1])
    _ticks(ax)


# -- Fig. 6: trajectory composition ---------------------------------------------------------
def trajectory_composition(doc: dict[str, Any]) -> str:
    """Per series, the clean-correct and clean-wrong trajectory shares as stacked bars with
    the class-conditioned RAS on each segment (Bench-C Fig. 6)."""
    from matplotlib.colors import to_rgba

    rows = [(s, half) for s in doc["series"] if s.get("trajectories") for half in (0, 1)]
    fig, axes = _subplots(1, 1, (8.5, 0.45 * max(2, len(rows)) + 1.5))
    ax = axes[0][0]
    labels = []
    for y, (s, half) in enumerate(rows):
        t = s["trajectories"]
        left = 0.0
        for k in range(3 * half, 3 * half + 3):
            share = _v(t["share"][k])
            if math.isnan(share):
                continue
            name = t["classes"][k]
            ax.barh(
                y,
                share,
                left=left,
                color=_TRAJECTORY_COLOURS[k],
                edgecolor="white",
                label=TRAJECTORY_LABELS[name] if y < 2 else None,
            )
            r = t["ras"][k]
            if share > 0.06 and r is not None:
                ax.text(left + share / 2, y, cell_text(r, signed=True), ha="center", va="center",
                        fontsize=TICK_PT, color=ink(to_rgba(_TRAJECTORY_COLOURS[k])))  # fmt: skip
            left += share
        labels.append(f"{s['label']} · clean-{'correct' if half == 0 else 'wrong'}")
    ax.set_yticks(range(len(rows)), labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(
        "share of complete trajectories (segment text: class-conditioned RAS)", fontsize=LABEL_PT
    )
    _ticks(ax)
    if rows:
        fig.legend(fontsize=TICK_PT, ncol=3, loc="outside lower center")
    fig.suptitle("Trajectory composition with class-conditioned RAS (Bench-C Fig. 6)",
                 fontsize=TITLE_PT)  # fmt: skip
    return _svg(fig, "trajectories")


# -- VSI ----------------------------------------------------------------------------------
VSI_FLOOR_PLOT = 1e-6


def _log_ticks(ax: Any) -> None:
    """Plain ``1e-4`` tick labels on a log x axis (mathtext exponents print at ~70 % of the
    tick size, under the page's smallest font)."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=12))
    ax.xaxis.set_major_formatter(
        FuncFormatter(lambda v, _: f"1e{round(math.log10(v))}" if v > 0 else "")
    )
    ax.xaxis.set_minor_formatter(NullFormatter())


def vsi_distribution(doc: dict[str, Any], threshold: float) -> str:
    """Per-sample VSI on a log axis with the insensitive threshold (VSI paper Fig. 1); a series
    without per-sample values shows its recorded median and insensitive fraction. The legend
    (with each series' insensitive fraction f) sits beside the axes, never over a bar."""
    fig, axes = _subplots(1, 1, (7.2, 2.9))
    ax = axes[0][0]
    blocks = [(i, s) for i, s in enumerate(doc["series"]) if s.get("vsi")]
    all_vals = [
        max(v, VSI_FLOOR_PLOT) for _, s in blocks for v in (s["vsi"].get("values") or []) if v
    ]
    hi = max([threshold * 10, *all_vals]) if all_vals else 10.0
    bins = np.logspace(math.log10(VSI_FLOOR_PLOT), math.log10(hi * 1.5), 30)
    for i, s in blocks:
        v = s["vsi"]
        st = _style(i)
        f = v.get("insensitive_fraction")
        frac = f"f = {'n/a' if f is None else f'{100 * f:.1f}%'}"
        if v.get("values"):
            x = np.clip(np.array([_v(a) for a in v["values"]]), VSI_FLOOR_PLOT, None)
            ax.hist(
                x,
                bins=bins,
                histtype="stepfilled" if i == 0 else "step",
                alpha=0.45 if i == 0 else 1.0,
                color=st["color"],
                linestyle=st["linestyle"],
                linewidth=st["linewidth"],
                label=f"{s['label']} ({frac})",
            )
        if v.get("median") is not None:
            ax.axvline(
                max(v["median"], VSI_FLOOR_PLOT),
                color=st["color"],
                ls=":",
                lw=1.2,
                label=f"{s['label']} median" + ("" if v.get("values") else f" ({frac})"),
            )
    ax.axvline(threshold, color="#d62728", ls="--", lw=1.3, label=f"VSI = {threshold}")
    ax.set_xscale("log")
    _log_ticks(ax)
    ax.set_xlabel("per-sample VSI (KL, region blur; f: share below the line)", fontsize=LABEL_PT)
    ax.set_ylabel("samples", fontsize=LABEL_PT)
    _ticks(ax)
    fig.legend(fontsize=TICK_PT, loc="outside right upper")
    fig.suptitle("Per-sample VSI distribution (VSI Fig. 1)", fontsize=TITLE_PT)
    return _svg(fig, "vsi-dist")


def _no_gap_note(blocks: list[dict[str, Any]]) -> str:
    """Fig. 2 with no gap to draw (no series has a probe accuracy on the low-VSI pool, so no
    gap): a note saying why, per series, instead of a plot of empty bars."""
    why = []
    for s in blocks:
        g, missing = s["vsi"]["gap"], s["vsi"].get("missing") or []
        tower = [m for m in missing if m.startswith("vision tower")]
        reason = (
            tower[0]
            if tower
            else (
                f"{g.get('n_low')} samples in the low-VSI pool: too few images for the probe's "
                "5 grouped folds"
            )
        )
        change = g.get("change_low")
        rate = "" if change is None else f", argmax change rate on the pool {change:.3f}"
        why.append(f"{s['label']}: {reason}{rate}")
    return Markup(
        '<p class="note fig-note">Encoder-LLM disconnect (VSI Fig. 2) not drawn: no series has '
        "a probe accuracy on the low-VSI pool, so no gap ({}).</p>"
    ).format("; ".join(why))


def vsi_gap(doc: dict[str, Any]) -> str:
    """Probe accuracy vs argmax change rate on the low-VSI pool, with the matched high-VSI
    control and the encoder-LLM gap bracket (VSI Fig. 2 / Table 2), one group per series: the
    bracket spans exactly the two bars it subtracts."""
    blocks = [s for s in doc["series"] if s.get("vsi")]
    parts = (
        ("probe_low", "probe acc, low VSI", "#1f77b4"),
        ("change_low", "Δargmax, low VSI", "#ff7f0e"),
        ("probe_high", "probe acc, high VSI", "#aec7e8"),
        ("change_high", "Δargmax, high VSI", "#ffbb78"),
    )
    if not any(s["vsi"]["gap"].get("probe_low") is not None for s in blocks):
        return _no_gap_note(blocks)
    fig, axes = _subplots(1, 1, (2.2 + 1.9 * max(1, len(blocks)), 3.2))
    ax = axes[0][0]
    width = 0.2
    for g, s in enumerate(blocks):
        _gap_bars(ax, g, s, parts, width)
        _gap_bracket(ax, g, s["vsi"]["gap"], width)
    ax.set_xticks(
        range(len(blocks)),
        [f"{s['label']}\n(n_low={s['vsi']['gap'].get('n_low')})" for s in blocks],
    )
    ax.set_xlim(-0.9, max(1, len(blocks)) - 0.4)
    ax.set_ylim(0, 1.08)
    _ticks(ax)
    fig.legend(fontsize=TICK_PT, loc="outside lower center", ncol=2)
    fig.suptitle("Encoder-LLM disconnect on the low-VSI pool (VSI Fig. 2 / Table 2)",
                 fontsize=TITLE_PT)  # fmt: skip
    return _svg(fig, "vsi-gap")


def _gap_bars(
    ax: Any, g: int, s: dict[str, Any], parts: tuple[tuple[str, str, str], ...], width: float
) -> None:
    """Series ``s``'s group of bars at ``g`` (one a part it has a value for; the probes with
    their fold spread), a baseline's hatched and outlined so it reads apart from a run's."""
    gap = s["vsi"]["gap"]
    for k, (key, label, colour) in enumerate(parts):
        val = gap.get(key)
        if val is None:
            continue
        err = gap.get(f"{key}_std") if key.startswith("probe") else None
        ax.bar(
            g + (k - 1.5) * width,
            val,
            width,
            color=colour,
            yerr=err,
            capsize=2,
            label=label if g == 0 else None,
            hatch=None if s["kind"] == "run" else "//",
            edgecolor="black" if s["kind"] != "run" else colour,
        )


def _gap_bracket(ax: Any, g: int, gap: dict[str, Any], width: float) -> None:
    """The gap's bracket left of group ``g``, spanning exactly the two bars it subtracts
    (probe accuracy and argmax change on the low-VSI pool), with the gap's value."""
    if gap.get("probe_low") is not None and gap.get("change_low") is not None:
        x = g - 2.2 * width
        ax.annotate(
            "",
            xy=(x, gap["probe_low"]),
            xytext=(x, gap["change_low"]),
            arrowprops={"arrowstyle": "<->", "color": "black", "lw": 0.8},
        )
        ax.text(
            x - 0.03,
            (gap["probe_low"] + gap["change_low"]) / 2,
            f"gap {gap['gap']:+.2f}" if gap.get("gap") is not None else "",
            ha="right",
            va="center",
            fontsize=TICK_PT,
        )


def reliability(doc: dict[str, Any]) -> str:
    """Accuracy against max-prob confidence in 10 equal-width bins (VSI Fig. 9), one line per
    series with Table 3, marker area by bin count; the diagonal is perfect calibration."""
    fig, axes = _subplots(1, 1, (4.0, 4.0))
    ax = axes[0][0]
    ax.plot([0, 1], [0, 1], color="#999", lw=0.8, ls="--", label="calibrated")
    for i, s in enumerate(doc["series"]):
        t = (s.get("vsi") or {}).get("signals")
        if not t:
            continue
        r = t["reliability"]
        pts = [(c, a, n) for c, a, n in zip(r["confidence"], r["accuracy"], r["count"],
                                            strict=True) if n]  # fmt: skip
        st = _style(i)
        xs, ys, ns = zip(*pts, strict=True)
        ax.plot(xs, ys, color=st["color"], ls=st["linestyle"], lw=st["linewidth"],
                label=f"{s['label']} (ECE {t['ece']:.3f})")  # fmt: skip
        ax.scatter(xs, ys, s=[8 + 60 * n / max(ns) for n in ns], color=st["color"], zorder=3)
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("max-prob confidence", fontsize=LABEL_PT)
    ax.set_ylabel("accuracy", fontsize=LABEL_PT)
    _ticks(ax)
    fig.legend(fontsize=TICK_PT, loc="outside lower center", ncol=1)
    fig.suptitle("Reliability of max-prob (VSI Fig. 9)", fontsize=TITLE_PT)
    return _svg(fig, "vsi-reliability")


# -- option order: accuracy by the position of the correct option -------------------------------
#: The two sides of the by-position figure: (block key, legend word, hatch).
POSITION_SIDES = (("clean", "clean", None), ("corrupted", "corrupted", "//"))


def position_series(doc: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The series with an ``accuracy_by_position`` block (index, series)."""
    return [(i, s) for i, s in enumerate(doc["series"]) if s.get("accuracy_by_position")]


def position_accuracy(doc: dict[str, Any]) -> str:
    """Accuracy by the position the correct option was shown at (docs/spec.md §4, option
    order): positions A, B, C, ... on x, one bar per series and side (clean solid, corrupted
    hatched, in the series' colour; a compare page: baseline clean / corrupted, then candidate
    clean / corrupted), each bar's value above it. A model answering by content has level bars;
    one that prefers a position is right far more often when the answer sits there."""
    from matplotlib.colors import to_rgba

    blocks = position_series(doc)
    bars = [(i, s, side, word, hatch)
            for i, s in blocks
            for side, word, hatch in POSITION_SIDES
            if s["accuracy_by_position"].get(side) is not None]  # fmt: skip
    positions = max((s["accuracy_by_position"]["positions"] for _, s in blocks), key=len,
                    default=[])  # fmt: skip
    n = max(1, len(bars))
    width = 0.8 / n
    fig, axes = _subplots(1, 1, (max(4.6, 1.6 + len(positions) * (0.3 + 0.32 * n)), 3.4))
    ax = axes[0][0]
    for b, (i, s, side, word, hatch) in enumerate(bars):
        colour = _style(i)["color"]
        values = [_v(x) for x in s["accuracy_by_position"][side]]
        xs = [j + (b - (n - 1) / 2) * width for j in range(len(values))]
        face = to_rgba(colour, 1.0 if hatch is None else 0.35)
        ax.bar(xs, [0 if math.isnan(v) else v for v in values], width, color=face,
               edgecolor=colour, hatch=hatch, linewidth=0.8,
               label=f"{s['label']} · {word}")  # fmt: skip
        for x, v in zip(xs, values, strict=True):
            if not math.isnan(v):
                ax.text(x, v + 0.02, cell_text(v), ha="center", va="bottom", fontsize=TICK_PT,
                        rotation=90 if n > 2 else 0)  # fmt: skip
    ax.set_xticks(range(len(positions)), positions)
    ax.set_xlim(-0.6, len(positions) - 0.4)
    ax.set_ylim(0, 1.25 if n > 2 else 1.12)
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1.0])
    ax.set_xlabel("position the correct option was shown at", fontsize=LABEL_PT)
    ax.set_ylabel("accuracy", fontsize=LABEL_PT)
    _ticks(ax)
    if bars:
        fig.legend(fontsize=TICK_PT, loc="outside lower center", ncol=2)
    fig.suptitle("Accuracy by position of the correct option (option order)", fontsize=TITLE_PT)
    return _svg(fig, "position")


#: Figure id -> (section, caption, renderer). The page draws them in this order.
PLOTS: dict[str, tuple[str, str, Callable[[dict[str, Any]], str]]] = {
    "heatmap-ras": (
        "heatmaps",
        "Mean RAS per corruption x severity cell; frames: failed (red) or improved "
        "(green) cell gates; second line under a candidate: its change, candidate − baseline.",
        lambda d: heatmap(d, "ras", "RAS by corruption and severity"),
    ),
    "heatmap-accuracy": (
        "heatmaps",
        "Accuracy per corruption x severity cell.",
        lambda d: heatmap(d, "accuracy", "Accuracy by corruption and severity"),
    ),
    "severity": (
        "severity",
        "R_c, R_w and RAS by severity, mean over each family's "
        "corruptions; dashed: overlaid series.",
        severity,
    ),
    "family-matrix": (
        "severity",
        "Signed RAS on the clean-correct (R_c) and clean-wrong (R_w) pairs by family and "
        "severity, mean over each family's corruptions; one colour scale for both.",
        family_matrix,
    ),
    "plane": (
        "plane",
        "Clean-corrupted pairs in the (ΔS, ΔC) plane per correctness state; "
        "markers: each series' state mean.",
        component_plane,
    ),
    "trajectories": (
        "trajectories",
        "Trajectory classes over severities per (sample, corruption).",
        trajectory_composition,
    ),
    "accuracy-by-position": (
        "order",
        "Accuracy over (sample, rotation) pairs by the position the correct option was shown "
        "at, every sample scored under cyclic rotations of its options; solid: clean, hatched: "
        "pooled over the rotated corrupted conditions. Level bars: the model answers by "
        "content; a peak: it prefers that position.",
        position_accuracy,
    ),
    "vsi-distribution": (
        "vsi",
        "Per-sample VSI; red dashed line: the 0.05 insensitivity threshold.",
        lambda d: vsi_distribution(d, spec.VSI_INSENSITIVE),
    ),
    "vsi-gap": (
        "vsi",
        "Own-tower probe accuracy vs argmax change rate on the low-VSI pool and its matched "
        "high-VSI control (error bars: 5-fold std); hatched: a baseline from snapshots.",
        vsi_gap,
    ),
    "vsi-reliability": (
        "vsi",
        "Accuracy per max-prob bin of the VSI pass's clean option answers.",
        reliability,
    ),
}


#: Figures written straight as SVG (:mod:`benchc.report.svgmatrix`): no matplotlib Figure, so
#: :func:`figures` has none of them.
DIRECT_SVG = frozenset({"heatmap-ras", "heatmap-accuracy", "family-matrix"})

#: Figures drawn in this process, by figure id and the digest of what they read of the document
#: (least recently used dropped first): a page drawn again, or another page of the same run,
#: draws no figure twice.
_DRAWN: OrderedDict[tuple[str, str], str] = OrderedDict()
_DRAWN_MAX = 64
_drawn_lock = threading.Lock()


def figure_inputs_digest(doc: dict[str, Any]) -> str:
    """A digest of everything a figure reads of ``doc`` (its series, axes and cell statuses)
    and of the matplotlib that draws it."""
    import matplotlib

    def plain(o: Any) -> Any:
        return o.tolist() if hasattr(o, "tolist") else repr(o)

    payload = json.dumps(
        [matplotlib.__version__, doc["series"], doc["axes"], doc.get("cell_status", {})],
        sort_keys=True,
        default=plain,
    )
    return hashlib.blake2b(payload.encode(), digest_size=20).hexdigest()


def render_all(doc: dict[str, Any], keys: Sequence[str] | None = None) -> dict[str, str]:
    """Every figure the document can support (of ``keys``, default all), as inline SVG by
    figure id. A figure this process drew before from the same inputs is not drawn again."""
    out = {}
    memo = _KEEP.get() is None
    digest = figure_inputs_digest(doc) if memo else ""
    has_grid = any(s.get("cells") for s in doc["series"])
    has_vsi = any(s.get("vsi") for s in doc["series"])
    for key, (section, _, render) in PLOTS.items():
        if keys is not None and key not in keys:
            continue
        if section == "vsi" and not has_vsi:
            continue
        if section == "order":
            if not position_series(doc):  # no rotations stored: the page says so instead
                continue
        elif section != "vsi" and not has_grid:
            continue
        if section == "trajectories" and not any(s.get("trajectories") for s in doc["series"]):
            continue
        if memo:
            with _drawn_lock:
                hit = _DRAWN.get((key, digest))
                if hit is not None:
                    _DRAWN.move_to_end((key, digest))
            if hit is None:
                hit = render(doc)
                with _drawn_lock:
                    _DRAWN[(key, digest)] = hit
                    while len(_DRAWN) > _DRAWN_MAX:
                        _DRAWN.popitem(last=False)
            out[key] = hit
        else:
            out[key] = render(doc)
    return out


def figures(doc: dict[str, Any], keys: Sequence[str] | None = None) -> dict[str, Any]:
    """The matplotlib Figures :func:`render_all` draws (of ``keys``), by their SVG salt, left
    open (not written) so a check can read the drawing itself: where legends and labels
    landed, what each panel holds. The caller closes them. The :data:`DIRECT_SVG` figures
    have no Figure: they are not drawn here."""
    keep: dict[str, Any] = {}
    keys = [k for k in (PLOTS if keys is None else keys) if k not in DIRECT_SVG]
    token = _KEEP.set(keep)
    try:
        render_all(doc, keys)
    finally:
        _KEEP.reset(token)
    return keep
