"""The report's figures, checked on matplotlib's own drawing (plots.figures: the Figures the
page's SVG is written from, laid out): every text at least plots.MIN_PT (9.3 px at the size
the page shows them), no legend over any panel, its tick labels or its data, no blank panel,
no annotation spilling into a neighbouring panel, heatmap labels that contrast with their cell
(WCAG >= 4.5) and never "+0.00", titled colour bars. The heatmaps and family matrices, written
straight as SVG (plots.DIRECT_SVG), are checked on that SVG (check_svg): it parses, every text
at least MIN_PT and inside the viewBox, cell labels inside their cell and contrasting with it,
no two labels overlapping, a titled colour bar; every cell of the document present with its
colour, value and frame. On a candidate gated against a recorded baseline and on a three-run
comparison; a matrix undefined in every cell is left out."""

from __future__ import annotations

import copy
import math
import re
import xml.etree.ElementTree as ET

import matplotlib
import numpy as np
import pytest
from matplotlib.colors import Normalize, to_hex, to_rgba
from matplotlib.font_manager import FontProperties
from matplotlib.image import AxesImage
from matplotlib.patches import Polygon
from matplotlib.text import Text
from matplotlib.textpath import TextPath, text_to_path

from benchc.report import baseline as snap
from benchc.report import data, plots
from benchc.report.fmt import reference_series
from benchc.results.reader import read_run
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline

N_BOOT = 20


@pytest.fixture(scope="module")
def gated(tmp_path_factory) -> dict:
    """The report document of a candidate against its recorded baseline (every block)."""
    root = tmp_path_factory.mktemp("gated")
    ds = make_dataset(root / "ds", n=18)
    base = make_run(root / "results", ds)
    cur = make_run(root / "results", ds, damp=0.6, fingerprint="cur")
    folder = snap.read_folder(record_baseline(base, root / "thresholds"))
    return data.build([read_run(cur)], baseline=folder, baseline_run=snap.evidence_run(folder),
                      n_boot=N_BOOT)  # fmt: skip


@pytest.fixture(scope="module")
def three(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("three")
    ds = make_dataset(root / "ds", n=18)
    runs = [make_run(root / "r", ds, model=m, seed=k, damp=0.3 * k)
            for k, m in enumerate(("first-model", "second-model", "third-model"))]  # fmt: skip
    return data.build([read_run(r) for r in runs], n_boot=N_BOOT)


def _colorbar(ax) -> bool:
    return ax.get_label() == "<colorbar>"


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def _texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def has_data(ax) -> bool:
    """The panel draws something of the data: a finite image, a line in data coordinates with
    a finite point, a non-empty collection (scatter, contour), a histogram's outline or a
    non-empty bar."""
    for im in ax.get_images():
        if isinstance(im, AxesImage) and np.isfinite(np.ma.filled(im.get_array(), np.nan)).any():
            return True
    for line in ax.get_lines():
        xy = np.asarray(line.get_xydata(), dtype=float)
        if line.get_transform() == ax.transData and np.isfinite(xy).all(axis=1).any():
            return True
    if any(len(c.get_paths()) or len(c.get_offsets()) for c in ax.collections):
        return True
    if any(len(p.get_xy()) > 2 for p in ax.patches if isinstance(p, Polygon)):  # a histogram
        return True
    return any(abs(b.get_width() * b.get_height()) > 0 for c in ax.containers for b in c)


def _contrast(fg, bg) -> float:
    def lum(c):
        lin = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c[:3]]
        return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]

    a, b = sorted((lum(to_rgba(fg)), lum(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def check(doc: dict, keys=None) -> list[str]:
    """Every layout problem of every figure of ``doc`` (of ``keys``), as readable strings."""
    import matplotlib.pyplot as plt

    figs = plots.figures(doc, keys)
    try:
        problems = check_figures(figs)
    finally:
        for fig in figs.values():
            plt.close(fig)
    direct = [k for k in (plots.PLOTS if keys is None else keys) if k in plots.DIRECT_SVG]
    for key, svg in plots.render_all(doc, direct).items():
        problems += check_svg(key, svg)
    return problems


# -- the figures written straight as SVG --------------------------------------------------------
SVG = "{http://www.w3.org/2000/svg}"
ET.register_namespace("", SVG[1:-1])  # an edited figure written back as plain SVG
#: The font the figures name first (matplotlib's), measured here on its own glyph outlines.
PROP = FontProperties(family=["sans-serif"])


def _fill(el) -> str | None:
    return el.get("fill") or (re.search(r"fill:\s*([^;]+)", el.get("style", "")) or [None, None])[1]


def svg_text_boxes(root) -> list[tuple[str, float, tuple[float, float, float, float], object]]:
    """Every ``<text>`` of an SVG figure: its text, font size, the box its glyphs' ink covers
    in the SVG's coordinates (from matplotlib's outline of the glyphs, the anchor and the
    rotation the element states) and the element."""
    out = []
    for t in root.iter(f"{SVG}text"):
        text = "".join(t.itertext())
        x, y, size = float(t.get("x")), float(t.get("y")), float(t.get("font-size"))
        ext = TextPath((0, 0), text, size=size, prop=PROP).get_extents()
        advance = text_to_path.get_text_width_height_descent(text, PROP.copy(), ismath=False)
        advance = advance[0] * size / PROP.get_size_in_points()
        lead = {"start": 0.0, "middle": advance / 2, "end": advance}[t.get("text-anchor", "start")]
        rot = re.search(r"rotate\((-?[\d.]+)", t.get("transform", ""))
        a = math.radians(float(rot[1])) if rot else 0.0
        corners = [
            (x + math.cos(a) * u + math.sin(a) * v, y + math.sin(a) * u - math.cos(a) * v)
            for u in (ext.x0 - lead, ext.x1 - lead)
            for v in (ext.y0, ext.y1)
        ]
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        out.append((text, size, (min(xs), min(ys), max(xs), max(ys)), t))
    return out


def svg_cells(group) -> list[tuple[tuple[float, float, float, float], str]]:
    """A panel's cells: the boxes and fills of the rects in its crisp-edged cell group."""
    cells = []
    for g in group.iter(f"{SVG}g"):
        if g.get("shape-rendering") == "crispEdges":
            for r in g.iter(f"{SVG}rect"):
                x, y = float(r.get("x")), float(r.get("y"))
                cells.append(((x, y, x + float(r.get("width")), y + float(r.get("height"))),
                              _fill(r)))  # fmt: skip
    return cells


def _inside(inner, outer, slack: float = 0.0) -> bool:
    return (inner[0] >= outer[0] - slack and inner[1] >= outer[1] - slack
            and inner[2] <= outer[2] + slack and inner[3] <= outer[3] + slack)  # fmt: skip


def _boxes_overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def check_svg(key: str, svg: str) -> list[str]:
    """Every problem of a figure written straight as SVG, as readable strings: it does not
    parse; its size is not its viewBox's; no title; a text under plots.MIN_PT, outside the
    viewBox or over another text; a cell label outside its cell, printed as a zero of two
    decimals or under 4.5:1 contrast with its cell; no colour bar, or an untitled one."""
    svg = svg[: svg.rindex("</svg>") + len("</svg>")]  # a note may follow the figure
    try:
        root = ET.fromstring(svg)
    except ET.ParseError as exc:
        return [f"{key}: not well-formed SVG ({exc})"]
    problems = []
    vx, vy, vw, vh = (float(v) for v in root.get("viewBox").split())
    if root.get("width") != f"{vw:g}pt" or root.get("height") != f"{vh:g}pt":
        size = f"{root.get('width')} x {root.get('height')}"
        problems.append(f"{key}: size {size} is not the viewBox's")
    view = (vx, vy, vx + vw, vy + vh)
    texts = svg_text_boxes(root)
    if not any(size == plots.TITLE_PT for _, size, _, _ in texts):
        problems.append(f"{key}: no title")
    cells = [c for g in root.iter(f"{SVG}g") if g.get("id") for c in svg_cells(g)]
    for i, (text, size, box, el) in enumerate(texts):
        if size < plots.MIN_PT:
            problems.append(f"{key}: {text!r} at {size} pt")
        if not _inside(box, view):
            problems.append(f"{key}: {text!r} outside the viewBox")
        for other, _, b, _ in texts[i + 1 :]:
            if _boxes_overlap(box, b):
                problems.append(f"{key}: {text!r} over {other!r}")
        at = (float(el.get("x")), float(el.get("y")))
        under = [(c, fill) for c, fill in cells if c[0] <= at[0] <= c[2] and c[1] <= at[1] <= c[3]]
        if under:
            cell, fill = under[0]
            if not _inside(box, cell):
                problems.append(f"{key}: {text!r} spills out of its cell")
            if text in ("+0.00", "-0.00", "0.00"):
                problems.append(f"{key}: a zero printed as {text!r}")
            if _contrast(_fill(el) or "black", to_rgba(fill)) < 4.5:
                problems.append(f"{key}: {text!r} low contrast")
    gradients = {g.get("id") for g in root.iter(f"{SVG}linearGradient")}
    bars = [r for r in root.iter(f"{SVG}rect") if (_fill(r) or "")[5:-1] in gradients]
    if len(bars) != 1:
        problems.append(f"{key}: {len(bars)} colour bars")
    if not any(re.search(r"rotate\(-90", el.get("transform", "")) for *_, el in texts):
        problems.append(f"{key}: untitled colour bar")
    return problems


def check_figures(figs: dict) -> list[str]:
    """Every layout problem of the laid-out matplotlib figures ``figs`` (by id)."""
    problems = []
    for key, fig in figs.items():
        fig.canvas.draw()
        r = fig.canvas.get_renderer()
        panels = [ax for ax in fig.axes if not _colorbar(ax)]
        if not fig.get_suptitle():
            problems.append(f"{key}: no title")
        for t in _texts(fig):
            if t.get_fontsize() < plots.MIN_PT:
                problems.append(f"{key}: {t.get_text()!r} at {t.get_fontsize()} pt")
        boxes = [(ax, ax.get_tightbbox(r)) for ax in fig.axes]
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
        for leg in legends:
            lb = leg.get_window_extent(r)
            hit = [ax.get_title() or ax.get_label() for ax, b in boxes if _overlap(lb, b)]
            if hit:
                problems.append(f"{key}: legend over {hit}")
        for ax in panels:
            if not has_data(ax):
                problems.append(f"{key}: blank panel {ax.get_title()!r}")
            for t in ax.texts:  # labels on the data (not tick labels: 0.00 is a tick there)
                if any(z in t.get_text().split() for z in ("+0.00", "-0.00", "0.00")):
                    problems.append(f"{key}: a zero printed as {t.get_text()!r}")
                tb = t.get_window_extent(r)
                for other in panels:
                    if other is not ax and _overlap(tb, other.bbox):
                        problems.append(f"{key}: {t.get_text()!r} spills into another panel")
            images = ax.get_images()
            if images and key.startswith(("heat", "family")):  # cell labels on their cell
                im = images[0]
                m = np.ma.filled(im.get_array(), np.nan)
                for t in ax.texts:
                    j, i = (round(v) for v in t.get_position())
                    if 0 <= i < m.shape[0] and 0 <= j < m.shape[1] and not math.isnan(m[i, j]):
                        bg = im.cmap(im.norm(m[i, j]))
                        if _contrast(t.get_color(), bg) < 4.5:
                            problems.append(f"{key}: {t.get_text()!r} low contrast")
        for ax in fig.axes:
            if _colorbar(ax) and not (ax.get_ylabel() or ax.get_xlabel()):
                problems.append(f"{key}: untitled colour bar")
    return problems


def test_the_gated_report_figures_are_legible(gated):
    import matplotlib.pyplot as plt

    figs = plots.figures(gated)
    try:
        assert {"severity", "plane", "trajectories"} <= set(figs)
        assert not {"heat-ras", "heat-accuracy", "family-matrix"} & set(figs)
        assert check_figures(figs) == []
    finally:
        for fig in figs.values():
            plt.close(fig)
    svgs = plots.render_all(gated, sorted(plots.DIRECT_SVG))
    assert set(svgs) == plots.DIRECT_SVG
    assert [p for key, svg in svgs.items() for p in check_svg(key, svg)] == []


def test_a_comparison_of_three_runs_is_legible(three):
    assert check(three) == []


def test_a_matrix_undefined_everywhere_is_named_not_a_blank_panel(gated):
    doc = copy.deepcopy(gated)
    base = doc["series"][1]
    base["families"]["r_c"] = {f: [None] * len(row) for f, row in base["families"]["r_c"].items()}
    out = plots.family_matrix(doc)
    assert 'id="family-r_c-1"' not in out and 'id="family-r_w-1"' in out
    assert "Not drawn (undefined in every cell): R_c (clean-correct) of baseline." in out
    assert check(doc, ["family-matrix"]) == []


def test_the_checks_catch_what_they_check():
    """The checker is not vacuous: a legend over the data, a 6 pt label, a blank panel and a
    "+0.00" label are each reported."""
    import matplotlib.pyplot as plt

    fig, (a, _) = plt.subplots(1, 2, layout="constrained")
    a.plot([0, 1], [0, 1], label="data")
    a.legend(loc="center", fontsize=plots.MIN_PT)
    a.text(0.5, 0.2, "+0.00", fontsize=6)
    fig.suptitle("t")
    kinds = " | ".join(check_figures({"x": fig}))
    plt.close(fig)
    assert "legend over" in kinds and "at 6.0 pt" in kinds and "blank panel" in kinds
    assert "a zero printed as '+0.00'" in kinds


def test_cell_text_and_ink():
    assert plots.cell_text(0.0) == "0" and plots.cell_text(0.0, signed=True) == "0"
    assert plots.cell_text(0.004, signed=True) == "+0.004"
    assert plots.cell_text(-0.1234) == "-0.12" and plots.cell_text(0.5, signed=True) == "+0.50"
    assert plots.ink((0.4, 0.0, 0.05, 1)) == "white" and plots.ink((1, 1, 1, 1)) == "black"
    for v in np.linspace(0, 1, 41):
        for cmap in ("RdBu", "viridis"):
            bg = plots._plt().get_cmap(cmap)(v)
            assert _contrast(plots.ink(bg), bg) >= 4.5, (cmap, v)


def test_a_one_cell_run_is_legible(tmp_path):
    """A subset run (one corruption, one severity: one family, one cell) lays out as cleanly,
    without a layout warning."""
    import warnings

    run = make_run(tmp_path / "r", make_dataset(tmp_path / "ds", n=12), corruptions=("fog",),
                   severities=(3,))  # fmt: skip
    doc = data.build([read_run(run)], n_boot=N_BOOT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check(doc) == []


def test_each_distinct_figure_is_drawn_once_and_cropped_as_bbox_inches_tight(gated, monkeypatch):
    """render_all draws a figure once per distinct input (a second page of the same run draws
    nothing, a changed document draws again), and the one-pass SVG keeps exactly the box
    ``savefig(bbox_inches="tight")`` keeps: same size, every label inside."""
    import io
    import re

    import matplotlib

    monkeypatch.setattr(plots, "_DRAWN", type(plots._DRAWN)())
    drawn: list[int] = []
    real = plots._subplots

    def counted(*args, **kwargs):
        drawn.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(plots, "_subplots", counted)
    first = plots.render_all(gated, ["trajectories", "severity"])
    assert len(drawn) == 2
    assert plots.render_all(copy.deepcopy(gated), ["trajectories", "severity"]) == first
    assert len(drawn) == 2  # the same inputs: nothing drawn again
    changed = copy.deepcopy(gated)
    changed["series"][0]["label"] = "renamed"
    assert "renamed" in plots.render_all(changed, ["severity"])["severity"]
    assert len(drawn) == 3

    fig = plots.figures(gated, ["severity"]).popitem()[1]
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    matplotlib.pyplot.close(fig)

    def size(svg: str) -> tuple[float, float]:
        w, h = re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
        return float(w), float(h)

    assert size(first["severity"]) == pytest.approx(size(buf.getvalue()), abs=0.01)


# -- the heatmaps and family matrices, written straight as SVG ----------------------------------
def _grid(cells):
    """Cells (box, fill) by (row, column), from their positions."""
    ys = sorted({round(b[1], 2) for b, _ in cells})
    xs = sorted({round(b[0], 2) for b, _ in cells})
    return {(ys.index(round(b[1], 2)), xs.index(round(b[0], 2))): (b, f) for b, f in cells}


def _texts_in(root, box) -> list[str]:
    """The texts anchored inside ``box``, top to bottom."""
    got = []
    for t in root.iter(f"{SVG}text"):
        x, y = float(t.get("x")), float(t.get("y"))
        if box[0] <= x <= box[2] and box[1] <= y <= box[3]:
            got.append((y, "".join(t.itertext())))
    return [t for _, t in sorted(got)]


@pytest.mark.parametrize("figure", ["ras", "accuracy"])
def test_every_heatmap_cell_is_the_documents(gated, figure):
    """Each panel holds one rect per defined cell, painted with matplotlib's colormap colour of
    the value (what imshow painted), labelled with the value and, on the candidate's panel,
    its change from the baseline; failed and improved cell gates framed in their colour."""
    doc = copy.deepcopy(gated)
    fams = doc["axes"]["families"]
    rows = [c for f in fams for c in fams[f]]
    sevs = doc["axes"]["severities"]
    first, second = f"{rows[0]}-{sevs[0]}", f"{rows[-1]}-{sevs[-1]}"
    doc["cell_status"] = {first: "fail", second: "improved", f"{rows[0]}-{sevs[-1]}": "pass"}
    series = [s for s in doc["series"] if s["cells"].get(figure)]
    assert len(series) == 2 and len(rows) * len(sevs) >= 4
    series[1]["cells"][figure].pop(second)  # a cell the baseline lacks: no rect, no change
    root = ET.fromstring(plots.heatmap(doc, figure, "T"))
    lo, hi = plots.heat_limits(figure, series)
    cmap = matplotlib.colormaps["RdBu" if figure in plots.SIGNED else "viridis"]
    base = reference_series(series)
    for p, s in enumerate(series):
        (group,) = [g for g in root.iter(f"{SVG}g") if g.get("id") == f"heat-{figure}-{p}"]
        assert "".join(group.itertext()).count(s["label"]) == 1  # its title
        cells = _grid(svg_cells(group))
        vals = s["cells"][figure]
        want = {(r, j): f"{c}-{sev}" for r, c in enumerate(rows) for j, sev in enumerate(sevs)
                if vals.get(f"{c}-{sev}") is not None}  # fmt: skip
        assert len(cells) == len(want) == len(vals)
        for rc, key in want.items():
            box, fill = cells[rc]
            assert fill == to_hex(cmap(Normalize(lo, hi)(vals[key]))), key
            label = [plots.cell_text(vals[key])]
            ref = base["cells"][figure].get(key)
            if s is not base and ref is not None and vals[key] != ref:
                label.append(plots.cell_text(vals[key] - ref, signed=True))
            assert _texts_in(root, box) == label, key
        framed = {
            (round(float(r.get("x"))), round(float(r.get("y")))): r.get("stroke")
            for r in group.iter(f"{SVG}rect") if r.get("fill") == "none" and r.get("stroke")
            and r.get("stroke") != "#000000"
        }  # fmt: skip
        if p == 0:
            at = {k: cells[rc][0] for rc, k in want.items()}
            assert framed == {
                (round(at[first][0] + 1), round(at[first][1] + 1)): plots.STATUS_COLOURS["fail"],
                (round(at[second][0] + 1), round(at[second][1] + 1)):
                    plots.STATUS_COLOURS["improved"],
            }  # fmt: skip
        else:
            assert framed == {}
    assert check_svg("heat", ET.tostring(root, encoding="unicode")) == []


def test_every_family_matrix_cell_is_the_documents(gated):
    root = ET.fromstring(plots.family_matrix(gated))
    cmap, norm = matplotlib.colormaps["RdBu"], Normalize(-plots.FAMILY_RANGE, plots.FAMILY_RANGE)
    fams = list(gated["axes"]["families"])
    n = 0
    for k, s in enumerate(gated["series"]):
        for fig_name, name in plots.FAMILY_MATRICES:
            (group,) = [g for g in root.iter(f"{SVG}g") if g.get("id") == f"family-{fig_name}-{k}"]
            cells = _grid(svg_cells(group))
            rows = s["families"][fig_name]
            want = {(r, j): v for r, f in enumerate(fams) for j, v in enumerate(rows.get(f) or [])
                    if v is not None}  # fmt: skip
            assert set(cells) == set(want) and want
            for rc, v in want.items():
                box, fill = cells[rc]
                assert fill == to_hex(cmap(norm(v)))
                assert _texts_in(root, box) == [plots.cell_text(v, signed=True)]
            texts = ["".join(t.itertext()) for t in group.iter(f"{SVG}text")]
            assert name in texts and s["label"] in texts
            n += 1
    assert n == 2 * len(gated["series"])


def test_matrix_labels_are_escaped_and_stay_inside_the_figure(gated):
    """A label with markup characters is text, not markup, and a long one widens the figure:
    every label still lies inside the viewBox."""
    doc = copy.deepcopy(gated)
    label = 'cand<b>&amp; "quoted" </svg> ' + "very-long-checkpoint-name-" * 4
    doc["series"][0]["label"] = label
    first, *rest = doc["axes"]["families"].items()
    doc["axes"]["families"] = {"a <family> & more": first[1], **dict(rest)}
    for key, svg in (("heat", plots.heatmap(doc, "ras", "RAS & <co>")),
                     ("family", plots.family_matrix(doc))):  # fmt: skip
        root = ET.fromstring(svg)
        texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
        assert label in texts, key
        assert check_svg(key, svg) == []
    root = ET.fromstring(plots.heatmap(doc, "ras", "RAS & <co>"))
    assert "RAS & <co>" in ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    assert "a <family> & more" in ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def test_the_svg_checks_catch_what_they_check(gated):
    """check_svg is not vacuous: a label pushed out of the viewBox, a 6 pt label, a "+0.00"
    cell label, a label in the wrong ink, two overlapping labels, a figure without a colour
    bar, and markup that does not parse are each reported."""
    svg = plots.heatmap(gated, "ras", "RAS")
    assert check_svg("h", svg) == []
    root = ET.fromstring(svg)
    vx, _, vw, _ = (float(v) for v in root.get("viewBox").split())
    texts = list(root.iter(f"{SVG}text"))
    title = next(t for t in texts if float(t.get("font-size")) == plots.TITLE_PT)
    cell = next(t for t in texts if re.fullmatch(r"-?\d\.\d+", t.text or ""))
    ticks = [t for t in texts if t.get("text-anchor") == "end"]  # the row labels
    title.set("x", str(vx + vw - 5))  # its right half outside the figure
    ticks[0].set("font-size", "6")
    cell.text = "+0.00"
    cell.set("fill", "white" if cell.get("fill") != "white" else "black")
    ticks[1].set("y", ticks[0].get("y"))
    bar = next(r for r in root.iter(f"{SVG}rect") if (r.get("fill") or "").startswith("url("))
    bar.set("fill", "#000000")
    kinds = " | ".join(check_svg("h", ET.tostring(root, encoding="unicode")))
    assert "'RAS' outside the viewBox" in kinds and "at 6.0 pt" in kinds
    assert "a zero printed as '+0.00'" in kinds and "'+0.00' low contrast" in kinds
    assert f"{ticks[0].text!r} over {ticks[1].text!r}" in kinds and "0 colour bars" in kinds
    assert check_svg("h", svg.replace("</g>", "", 1))[0].startswith("h: not well-formed SVG")
