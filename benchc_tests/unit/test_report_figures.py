"""The report's figures, checked on matplotlib's own drawing (plots.figures: the Figures the
page's SVG is written from, laid out): every text at least plots.MIN_PT (9.3 px at the size
the page shows them), no legend over any panel, its tick labels or its data, no blank panel,
no annotation spilling into a neighbouring panel, heatmap labels that contrast with their cell
(WCAG >= 4.5) and never "+0.00", titled colour bars. On a candidate gated against a recorded
baseline and on a three-run comparison; a matrix undefined in every cell is left out."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.image import AxesImage
from matplotlib.patches import Polygon
from matplotlib.text import Text

from benchc.report import baseline as snap
from benchc.report import data, plots
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
        return check_figures(figs)
    finally:
        for fig in figs.values():
            plt.close(fig)


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
        assert {"heat-ras", "heat-accuracy", "severity", "family-matrix", "plane"} <= set(figs)
        assert check_figures(figs) == []
    finally:
        for fig in figs.values():
            plt.close(fig)


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
    first = plots.render_all(gated, ["heatmap-ras", "severity"])
    assert len(drawn) == 2
    assert plots.render_all(copy.deepcopy(gated), ["heatmap-ras", "severity"]) == first
    assert len(drawn) == 2  # the same inputs: nothing drawn again
    changed = copy.deepcopy(gated)
    changed["series"][0]["label"] = "renamed"
    assert "renamed" in plots.render_all(changed, ["severity"])["severity"]
    assert len(drawn) == 3

    fig = plots.figures(gated, ["heatmap-ras"]).popitem()[1]
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    matplotlib.pyplot.close(fig)

    def size(svg: str) -> tuple[float, float]:
        w, h = re.search(r'width="([\d.]+)pt" height="([\d.]+)pt"', svg).groups()
        return float(w), float(h)

    assert size(first["heatmap-ras"]) == pytest.approx(size(buf.getvalue()), abs=0.01)
