"""Report plots: the report document's numbers drawn as inline SVG with matplotlib.

Every function takes the document built by :mod:`benchc.report.data` and plots only what it
holds, the first series solid and every other series (the baseline, or the runs compared)
overlaid dashed, so a figure and ``report.json`` cannot disagree. Output is deterministic
(fixed SVG hash salt, no date), so the same run gives a byte-identical page.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from markupsafe import Markup

from benchc import spec
from benchc.report.fmt import reference_series

#: Font size of a heatmap cell's label (its value, and its change under a candidate).
HEAT_LABEL_PT = 8.0
#: One colour per series, first = the run under report.
PALETTE = ("#1f77b4", "#222222", "#d62728", "#2ca02c", "#9467bd", "#8c564b")
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


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _lift_suptitle(fig: Any) -> None:
    """Put the figure title above every panel's own title and labels: a fixed ``y`` overlaps
    them on a short figure (a small grid's heatmap, Fig. 5, Fig. 7)."""
    title = next((t for t in fig.texts if t.get_text() == fig.get_suptitle()), None)
    if not fig.get_suptitle() or title is None or not fig.axes:
        return
    renderer = fig.canvas.get_renderer()
    top = max(ax.get_tightbbox(renderer).y1 for ax in fig.axes if ax.get_visible())
    title.set_y(top / fig.bbox.height + 0.02)
    title.set_verticalalignment("bottom")


def _svg(fig: Any, salt: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog), deterministic."""
    import matplotlib

    plt = _plt()
    _lift_suptitle(fig)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"benchc-{salt}"}):
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    start, end = text.find("<metadata>"), text.find("</metadata>")
    if start >= 0 and end > start:  # RDF boilerplate: bytes, and URLs a browser never needs
        text = text[:start] + text[end + len("</metadata>") :]
    return text


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


# -- corruption x severity heatmaps -----------------------------------------------------------
#: Signed alignment figures: their colour scales are centred on 0 (white = no change).
SIGNED = ("ras", "r_c", "r_w")


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
    series exists, its value's change from that series under the value.
    """
    plt = _plt()
    axes_info = doc["axes"]
    fams = axes_info["families"]
    rows = [c for f in fams for c in fams[f]]
    sevs = axes_info["severities"]
    series = [s for s in doc["series"] if s.get("cells") and s["cells"].get(figure)]
    lo, hi = heat_limits(figure, series)
    cmap = "RdBu" if figure in SIGNED else "viridis"
    n_p = max(1, len(series))
    # cell labels at 8 pt (two lines with a difference): readable on a 95-cell grid too
    fig, axes = plt.subplots(
        1, n_p, figsize=(1.4 + 3.0 * n_p, 0.42 * len(rows) + 1.4), squeeze=False
    )
    status = doc.get("cell_status", {})
    base = reference_series(series)
    ref = base["cells"][figure] if base is not None else None
    im = None
    for p, (ax, s) in enumerate(zip(axes[0], series, strict=False)):
        vals = s["cells"][figure]
        m = np.array([[_v(vals.get(f"{c}-{sev}")) for sev in sevs] for c in rows], dtype=np.float64)
        im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi, aspect="auto")
        for r, c in enumerate(rows):
            for j, sev in enumerate(sevs):
                key = f"{c}-{sev}"
                v = m[r, j]
                text = "–" if math.isnan(v) else f"{v:.2f}"
                if s is not base and ref is not None and ref.get(key) is not None:
                    if not math.isnan(v):  # candidate − baseline, under the candidate's value
                        text += f"\n{v - ref[key]:+.2f}"
                ax.text(j, r, text, ha="center", va="center", fontsize=HEAT_LABEL_PT,
                        color="black", linespacing=1.0)  # fmt: skip
                st = status.get(key) if p == 0 else None
                if st in ("fail", "improved"):
                    ax.add_patch(
                        plt.Rectangle(
                            (j - 0.5, r - 0.5),
                            1,
                            1,
                            fill=False,
                            lw=2.0,
                            edgecolor=STATUS_COLOURS[st],
                        )
                    )
        ax.set_xticks(range(len(sevs)), [str(x) for x in sevs], fontsize=7)
        ax.set_xlabel("severity", fontsize=7)
        ax.set_title(s["label"], fontsize=8)
        ax.set_yticks(range(len(rows)), rows if p == 0 else [""] * len(rows), fontsize=6.5)
        start = 0
        for fam in fams:
            end = start + len(fams[fam])
            if start:
                ax.axhline(start - 0.5, color="white", lw=2.5)
            if p == n_p - 1:
                ax.text(
                    len(sevs) - 0.35,
                    (start + end - 1) / 2,
                    fam,
                    rotation=-90,
                    va="center",
                    fontsize=7,
                )
            start = end
    if im is not None:
        fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.08)
    fig.suptitle(title, fontsize=9)
    return _svg(fig, f"heat-{figure}")


# -- Fig. 7: severity trajectories per family -------------------------------------------------
def severity(doc: dict[str, Any]) -> str:
    """Per family, R_c, R_w and RAS by severity (Bench-C Fig. 7), every series overlaid."""
    plt = _plt()
    fams = list(doc["axes"]["families"])
    sevs = doc["axes"]["severities"]
    fig, axes = plt.subplots(
        1, max(1, len(fams)), figsize=(2.4 * max(1, len(fams)), 2.6), sharey=True, squeeze=False
    )
    for ax, fam in zip(axes[0], fams, strict=False):
        for i, s in enumerate(doc["series"]):
            fam_vals = s.get("families") or {}
            for fig_name, marker in (("r_c", "o"), ("r_w", "^"), ("ras", "s")):
                row = (fam_vals.get(fig_name) or {}).get(fam)
                if not row:
                    continue
                st = _style(i)
                st["marker"] = marker
                ax.plot(sevs, [_v(x) for x in row], label=f"{fig_name} {s['label']}", **st)
        ax.axhline(0, color="#999999", lw=0.6)
        ax.set_title(fam, fontsize=8)
        ax.set_xticks(sevs)
        ax.tick_params(labelsize=7)
        ax.set_xlabel("severity", fontsize=7)
    axes[0][0].set_ylabel("R_c (o)  R_w (^)  RAS (s)", fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(
            handles,
            labels,
            fontsize=6,
            loc="lower center",
            ncol=min(6, len(labels)),
            bbox_to_anchor=(0.5, -0.12),
        )
    fig.suptitle("Severity trajectories per family (Bench-C Fig. 7)", fontsize=9)
    return _svg(fig, "severity")


#: Fig. 7's matrices, side by side: (figure, panel title). One scale and colour map for both, so
#: a clean-wrong gain reads against the clean-correct cost it comes with (Bench-C Sec. VII-E).
FAMILY_MATRICES = (("r_c", "R_c (clean-correct)"), ("r_w", "R_w (clean-wrong)"))
#: The matrices' symmetric colour range (signed RAS).
FAMILY_RANGE = 0.6


def family_matrix(
    doc: dict[str, Any], figures: tuple[tuple[str, str], ...] = FAMILY_MATRICES
) -> str:
    """Signed source RAS by family and severity: R_c beside R_w for every series (the
    matrices of Bench-C Fig. 7), one shared scale and colour bar.

    Each panel's SVG group has id ``family-<figure>-<series index>`` so a test can read one
    matrix's numbers back from the page.
    """
    plt = _plt()
    fams = list(doc["axes"]["families"])
    sevs = doc["axes"]["severities"]
    panels = [
        (k, s, fig_name, name)
        for k, s in enumerate(doc["series"])
        for fig_name, name in figures
        if (s.get("families") or {}).get(fig_name)
    ]
    n_p = max(1, len(panels))
    height = 0.42 * len(fams) + 1.2
    fig, axes = plt.subplots(1, n_p, figsize=(1.2 + 2.4 * n_p, height), squeeze=False)
    im = None
    for p, (ax, (k, s, fig_name, name)) in enumerate(zip(axes[0], panels, strict=False)):
        rows = s["families"][fig_name]
        m = np.array([[_v(x) for x in rows.get(f, [None] * len(sevs))] for f in fams])
        im = ax.imshow(m, cmap="RdBu", vmin=-FAMILY_RANGE, vmax=FAMILY_RANGE, aspect="auto")
        for r in range(m.shape[0]):
            for j in range(m.shape[1]):
                if not math.isnan(m[r, j]):
                    ax.text(j, r, f"{m[r, j]:+.2f}", ha="center", va="center", fontsize=6.5)
        ax.set_gid(f"family-{fig_name}-{k}")
        ax.set_xticks(range(len(sevs)), [str(x) for x in sevs], fontsize=7)
        ax.set_yticks(range(len(fams)), fams if p == 0 else [""] * len(fams), fontsize=7)
        ax.set_xlabel("severity", fontsize=7)
        ax.set_title(f"{name}\n{s['label']}", fontsize=8)
    if im is not None:
        fig.colorbar(im, ax=list(axes[0]), fraction=0.03, pad=0.04)
    # a third of an inch above the axes: clear of the two-line panel titles
    fig.suptitle(
        "R_c and R_w by family and severity (Bench-C Fig. 7)", fontsize=9, y=1 + 0.33 / height
    )
    return _svg(fig, "family-matrix")


# -- Fig. 5: the RAS component plane by correctness state -------------------------------------
def component_plane(doc: dict[str, Any]) -> str:
    """Per state, the first series' (ΔS, ΔC) density, every series' state mean as a marker
    and the other series' densities as contours; boxes give mean RAS (Bench-C Fig. 5)."""
    plt = _plt()
    planes = [(i, s) for i, s in enumerate(doc["series"]) if s.get("plane")]
    fig, axes = plt.subplots(1, 4, figsize=(10.5, 2.9), sharey=True, squeeze=False)
    if not planes:
        for ax in axes[0]:
            ax.text(0.5, 0.5, "no grid", ha="center", transform=ax.transAxes)
        return _svg(fig, "plane")
    edges = np.asarray(planes[0][1]["plane"]["edges"], dtype=np.float64)
    centres = (edges[:-1] + edges[1:]) / 2
    for ax, state in zip(axes[0], STATE_LABELS, strict=True):
        box = []
        for i, s in planes:
            st = s["plane"]["states"][state]
            dens = np.asarray(st["density"], dtype=np.float64).T  # rows ΔC, cols ΔS
            if i == planes[0][0]:
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
                    colors=_style(i)["color"],
                    linewidths=0.8,
                    linestyles="--",
                )
            if st["mean_d_s"] is not None and st["mean_d_c"] is not None:
                ax.plot(
                    st["mean_d_s"],
                    st["mean_d_c"],
                    marker=_style(i)["marker"],
                    ms=6,
                    color=_style(i)["color"],
                    mec="white",
                    ls="none",
                )
            r = st["mean_ras"]
            box.append(f"{s['label']}: RAS {'n/a' if r is None else f'{r:+.3f}'} (n={st['n']})")
        ax.text(
            0.03,
            0.97,
            "\n".join(box),
            transform=ax.transAxes,
            va="top",
            fontsize=5.5,
            bbox={"boxstyle": "round", "fc": "white", "alpha": 0.85},
        )
        ax.axhline(0, color="#888888", lw=0.5)
        ax.axvline(0, color="#888888", lw=0.5)
        ax.set_title(STATE_LABELS[state], fontsize=8)
        ax.set_xlabel("ΔS", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0][0].set_ylabel("ΔC", fontsize=7)
    fig.suptitle("RAS component plane by correctness state (Bench-C Fig. 5)", fontsize=9)
    return _svg(fig, "plane")


# -- Fig. 6: trajectory composition ---------------------------------------------------------
def trajectory_composition(doc: dict[str, Any]) -> str:
    """Per series, the clean-correct and clean-wrong trajectory shares as stacked bars with
    the class-conditioned RAS on each segment (Bench-C Fig. 6)."""
    plt = _plt()
    rows = [(s, half) for s in doc["series"] if s.get("trajectories") for half in (0, 1)]
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * max(2, len(rows)) + 1.0))
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
                ax.text(left + share / 2, y, f"{r:+.2f}", ha="center", va="center", fontsize=6.5)
            left += share
        labels.append(f"{s['label']} · clean-{'correct' if half == 0 else 'wrong'}")
    ax.set_yticks(range(len(rows)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(
        "share of complete trajectories (segment text: class-conditioned RAS)", fontsize=7
    )
    ax.tick_params(labelsize=7)
    if rows:
        ax.legend(fontsize=6, ncol=6, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.suptitle(
        "Trajectory composition with class-conditioned RAS (Bench-C Fig. 6)", fontsize=9, y=1.08
    )
    return _svg(fig, "trajectories")


# -- VSI ----------------------------------------------------------------------------------
VSI_FLOOR_PLOT = 1e-6


def vsi_distribution(doc: dict[str, Any], threshold: float) -> str:
    """Per-sample VSI on a log axis with the insensitive threshold (VSI paper Fig. 1); a series
    without per-sample values shows its recorded median and insensitive fraction."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 2.8))
    blocks = [(i, s) for i, s in enumerate(doc["series"]) if s.get("vsi")]
    all_vals = [
        max(v, VSI_FLOOR_PLOT) for _, s in blocks for v in (s["vsi"].get("values") or []) if v
    ]
    hi = max([threshold * 10, *all_vals]) if all_vals else 10.0
    bins = np.logspace(math.log10(VSI_FLOOR_PLOT), math.log10(hi * 1.5), 30)
    text = []
    for i, s in blocks:
        v = s["vsi"]
        st = _style(i)
        f = v.get("insensitive_fraction")
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
                label=s["label"],
            )
        if v.get("median") is not None:
            ax.axvline(
                max(v["median"], VSI_FLOOR_PLOT),
                color=st["color"],
                ls=":",
                lw=1.2,
                label=f"{s['label']} median",
            )
        text.append(f"{s['label']}: f = {'n/a' if f is None else f'{100 * f:.1f}%'}")
    ax.axvline(threshold, color="#d62728", ls="--", lw=1.3, label=f"VSI = {threshold}")
    ax.set_xscale("log")
    ax.set_xlabel("per-sample VSI (KL, region blur)", fontsize=7)
    ax.set_ylabel("samples", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.text(0.02, 0.95, "\n".join(text), transform=ax.transAxes, va="top", fontsize=6.5)
    ax.legend(fontsize=6, loc="upper right")
    fig.suptitle("Per-sample VSI distribution (VSI Fig. 1)", fontsize=9)
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
    plt = _plt()
    blocks = [s for s in doc["series"] if s.get("vsi")]
    parts = (
        ("probe_low", "probe acc, low VSI", "#1f77b4"),
        ("change_low", "Δargmax, low VSI", "#ff7f0e"),
        ("probe_high", "probe acc, high VSI", "#aec7e8"),
        ("change_high", "Δargmax, high VSI", "#ffbb78"),
    )
    if not any(s["vsi"]["gap"].get("probe_low") is not None for s in blocks):
        return _no_gap_note(blocks)
    fig, ax = plt.subplots(figsize=(1.6 + 1.9 * max(1, len(blocks)), 2.8))
    width = 0.2
    for g, s in enumerate(blocks):
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
                fontsize=6.5,
            )
    ax.set_xticks(
        range(len(blocks)),
        [f"{s['label']}\n(n_low={s['vsi']['gap'].get('n_low')})" for s in blocks],
        fontsize=7,
    )
    ax.set_xlim(-0.8, max(1, len(blocks)) - 0.4)
    ax.set_ylim(0, 1.3)  # headroom for the legend above the bars
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, loc="upper center", ncol=2)
    fig.suptitle("Encoder-LLM disconnect on the low-VSI pool (VSI Fig. 2 / Table 2)", fontsize=9)
    return _svg(fig, "vsi-gap")


def reliability(doc: dict[str, Any]) -> str:
    """Accuracy against max-prob confidence in 10 equal-width bins (VSI Fig. 9), one line per
    series with Table 3, marker area by bin count; the diagonal is perfect calibration."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.6, 3.2))
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
    ax.set_xlabel("max-prob confidence", fontsize=7)
    ax.set_ylabel("accuracy", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=6, loc="upper left")
    fig.suptitle("Reliability of max-prob (VSI Fig. 9)", fontsize=9)
    return _svg(fig, "vsi-reliability")


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


def render_all(doc: dict[str, Any]) -> dict[str, str]:
    """Every figure the document can support, as inline SVG by figure id."""
    out = {}
    has_grid = any(s.get("cells") for s in doc["series"])
    has_vsi = any(s.get("vsi") for s in doc["series"])
    for key, (section, _, render) in PLOTS.items():
        if section == "vsi" and not has_vsi:
            continue
        if section != "vsi" and not has_grid:
            continue
        if section == "trajectories" and not any(s.get("trajectories") for s in doc["series"]):
            continue
        out[key] = render(doc)
    return out
