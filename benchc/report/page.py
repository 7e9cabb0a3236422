"""The page: the report document and its SVG figures as one self-contained HTML file, from the
jinja2 templates in ``templates/`` (every value autoescaped; the SVG is benchc's own, ``Markup``).

Inline CSS, inline SVG, thumbnails as data URIs, no script and no network: the file opens
from disk and as a CI artifact. Sections carry ``class="report-section"`` and figures
``class="fig"`` so a browser test can count what rendered.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from benchc.metrics.figures import table2_figures
from benchc.report.fmt import f, reference_series
from benchc.report.plots import PLOTS, STATE_LABELS
from benchc.report.templating import environment
from benchc.report.vsi_page import vsi_tables
from benchc.spec import VSI_INSENSITIVE

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#1b1b1b}
header{background:#0f2740;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
header p{margin:4px 0 0;font-size:12px;color:#c8d6e5}nav{padding:6px 24px;background:#eef2f6;
font-size:12px}nav a{margin-right:12px}main{padding:0 24px 40px;max-width:1250px}
section{margin-top:26px}h2{font-size:17px;border-bottom:2px solid #0f2740;padding-bottom:3px}
table{border-collapse:collapse;font-size:12px;margin:6px 0}th,td{border:1px solid #d0d7de;
padding:3px 7px;text-align:right}th{background:#f3f5f7}td.l,th.l{text-align:left}
tr[id]{scroll-margin-top:48px}tr:target td{outline:2px solid #c62828}
tr.fail td{background:#fde8e8}tr.improved td{background:#e6f6e9}tr.unchecked td{background:#fff6d6}
.badge{display:inline-block;padding:1px 7px;border-radius:9px;font-size:11px;color:#fff}
.b-fail{background:#c62828}.b-improved{background:#2e7d32}.b-pass{background:#8a8a8a}
.b-unchecked{background:#b58900}.verdict-box{padding:10px 14px;border-radius:6px;margin:8px 0}
.v-fail{background:#fde8e8;border:1px solid #c62828}
.v-ok{background:#e6f6e9;border:1px solid #2e7d32}
.v-inconclusive{background:#fff6d6;border:1px solid #b58900}
.v-unresolved{background:#fff0e0;border:1px solid #d35400}
tr.unresolved td{background:#fff0e0}.b-unresolved{background:#d35400}
.v-none{background:#f3f5f7;border:1px solid #aaa}figure.fig{margin:10px 0;overflow-x:auto}
figure.fig svg{display:block;max-width:none}ul.movers{margin:2px 0;padding-left:16px}
td p.reason,td p.mdr-note{margin:0 0 2px}header ul{margin:4px 0 0;font-size:12px;color:#c8d6e5}
figcaption{font-size:12px;color:#555}
pre{background:#f3f5f7;padding:8px;overflow-x:auto;font-size:12px}.se{color:#777;font-size:11px}
.note{font-size:12px;color:#666}.cards{display:flex;flex-wrap:wrap;gap:14px}
.card{border:1px solid #d0d7de;border-radius:6px;padding:8px;flex:1 1 340px;max-width:440px;
min-width:0;box-sizing:border-box;font-size:12px;scroll-margin-top:8px}.card:target{outline:2px
solid #c62828}.card-title{font-size:14px;margin:0;font-weight:normal}.card-why{margin:2px 0 6px}
.thumbs{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:6px}
.thumbs figure{margin:0;text-align:center;font-size:10px;color:#555;overflow-wrap:anywhere}
.thumbs img{width:100%;height:auto;border:1px solid #ccc;image-rendering:pixelated}
.card-answers .said{display:block}.opt{display:grid;gap:2px 6px;align-items:end;
margin-top:4px}.opt2{grid-template-columns:14px minmax(0,1fr) repeat(2,64px)}
.opt4{grid-template-columns:14px minmax(0,1fr) repeat(4,minmax(42px,min-content))}
.opt .ans{font-weight:bold}
.opt-head{text-align:center;border-bottom:1px solid #d0d7de;overflow-wrap:anywhere}
.opt-who{font-size:10px;line-height:1.1}.opt-text{overflow-wrap:anywhere}
.pv{display:flex;flex-direction:column;font-size:11px}.bar{height:6px;background:#1f77b4;
display:block}.bar.x{background:#d62728}.bar.b0{opacity:.45}
"""

#: The page on any screen: no horizontal page scroll at 390 px. A table wider than the screen
#: scrolls inside its own box; a figure shows at its own size (every label >= 9 px, see
#: plots.MIN_PT) and scrolls inside its frame; long words (paths, ids) wrap.
LAYOUT_CSS = """
table{display:block;max-width:100%;overflow-x:auto;width:max-content}
p,li,h1,h2,h3,figcaption,header{overflow-wrap:break-word}
nav{display:flex;flex-wrap:wrap;gap:2px 12px}nav a{margin-right:0}
@media (max-width:600px){header,nav{padding-left:10px;padding-right:10px}
main{padding:0 10px 30px}header h1{font-size:17px}h2{font-size:16px}
figure.fig figcaption::before{content:"Each figure keeps its size: swipe it sideways. ";
font-style:italic}}
"""

#: The page's whole stylesheet.
STYLESHEET = CSS + LAYOUT_CSS

SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict"),
    ("notes", "Run notes"),
    ("table2", "Model-level robustness (Bench-C Table II)"),
    ("states", "Four-state diagnosis (Bench-C Table III)"),
    ("heatmaps", "Corruption x severity"),
    ("severity", "Severity trajectories per family (Bench-C Fig. 7)"),
    ("plane", "RAS component plane and sign regimes (Bench-C Fig. 5, Table IV)"),
    ("trajectories", "Trajectory composition (Bench-C Fig. 6)"),
    ("order", "Option order (accuracy by position of the correct option)"),
    ("vsi", "Visual sensitivity (VSI Tables 1-3, Fig. 1, Fig. 2)"),
    ("drilldown", "Samples that moved most"),
)
#: A compare page's extra section, right after Table II.
AGREEMENT = ("agreement", "Cross-run agreement (VSI Sec. 2.3, Bench-C Tables VI and V)")
#: Table VI column headers, by metric.
TABLE_VI_HEADS = {"accuracy": "Abs.", "d_acc": "ΔAcc", "relative_robustness": "Rel.", "ras": "RAS"}
#: Bench-C Table IV's regimes, by name.
REGIME_LABELS = {
    "worse_flatter": "ΔC>0 worse, ΔS>0 flatter",
    "worse_sharper": "ΔC>0 worse, ΔS<0 sharper",
    "better_flatter": "ΔC<0 better, ΔS>0 flatter",
    "better_sharper": "ΔC<0 better, ΔS<0 sharper",
    "boundary": "boundary",
}


def _table2(doc: dict[str, Any]) -> dict[str, Any]:
    """Table II's cells as text: each series' figures (± their SE), then each run minus the
    reference series."""
    keys = [fig.key for fig in table2_figures()]
    digits = {k: 1 if k == "mixed_cell_rate" else 3 for k in keys}
    series = [s for s in doc["series"] if s.get("table2")]
    rows = []
    for s in series:
        cells = []
        for key in keys:
            x = s["table2"].get(key)
            if x is None or x.get("value") is None:
                cells.append(("n/a", None))
            else:
                se = f(x["se"], digits[key]) if x.get("se") else None
                cells.append((f(x["value"], digits[key]), se))
        rows.append({"label": s["label"], "kind": s["kind"], "cells": cells})
    base = reference_series(series)
    diffs = []
    for cand in (s for s in series if base is not None and s is not base):
        cells = []
        for key in keys:
            x, y = cand["table2"].get(key), base["table2"].get(key)
            ok = x and y and x.get("value") is not None and y.get("value") is not None
            cells.append(f(x["value"] - y["value"], digits[key], signed=True) if ok else "n/a")
        diffs.append({"label": cand["label"], "base": base["label"], "cells": cells})
    return {"heads": [fig.column for fig in table2_figures()], "rows": rows, "diffs": diffs}


def _by_position(doc: dict[str, Any]) -> dict[str, Any]:
    """The accuracy-by-position table's cells as text: one row per series and side (clean,
    corrupted) that has them, the series without rotations named (``lacking``)."""
    blocks = [(s["label"], s.get("accuracy_by_position")) for s in doc["series"]]
    shown = [(label, b) for label, b in blocks if b]
    positions = max((b["positions"] for _, b in shown), key=len, default=[])
    rows = [
        {
            "label": label,
            "side": side,
            "cells": [f(b[side][k]) if k < len(b[side]) else "n/a" for k in range(len(positions))],
        }
        for label, b in shown
        for side in ("clean", "corrupted")
        if b.get(side) is not None
    ]
    return {
        "positions": positions,
        "rows": rows,
        "pooled": [
            (label, b["corrupted_conditions"])
            for label, b in shown
            if b.get("corrupted_conditions")
        ],
        "lacking": [label for label, b in blocks if not b] if rows else [],
    }


def _by_status(items: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The gates by status, in the verdicts' order (the verdict template picks the ones it
    lists, shows and folds away)."""
    out: dict[str, list[dict[str, Any]]] = {
        "fail": [], "unresolved": [], "unchecked": [], "improved": [], "pass": []
    }  # fmt: skip
    for v in items:
        out.setdefault(str(v.get("status")), []).append(v)
    return out


def _verdict(doc: dict[str, Any]) -> str:
    """The verdict section alone (its template macro)."""
    items = doc["verdicts"].get("items") or []
    macros = environment().get_template("verdict.html.j2").module
    return str(macros.verdict(doc, _by_status(items)))  # type: ignore[attr-defined]


def _verdict_row(v: dict[str, Any]) -> str:
    """One gate's table row alone (its template macro)."""
    macros = environment().get_template("verdict.html.j2").module
    return str(macros.verdict_row(v))  # type: ignore[attr-defined]


def _figures(svgs: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """The figures by section, in drawing order; the SVG is benchc's own drawing (trusted)."""
    by_section: dict[str, list[dict[str, Any]]] = {}
    for key, svg in svgs.items():
        section, caption, _ = PLOTS[key]
        by_section.setdefault(section, []).append(
            {"key": key, "svg": Markup(svg), "caption": caption}
        )
    return by_section


# -- the page ----------------------------------------------------------------------------------
def render(doc: dict[str, Any], svgs: dict[str, str], *, drill_note: str | None = None) -> str:
    """The complete HTML page (templates/page.html.j2)."""
    sections = list(SECTIONS)
    if doc.get("agreement"):
        sections.insert(2, AGREEMENT)
    lacking = {
        block: [s["label"] for s in doc["series"] if not s.get(block)]
        for block in ("states", "regimes", "trajectories", "plane")
    }
    return (
        environment()
        .get_template("page.html.j2")
        .render(
            doc=doc,
            css=Markup(STYLESHEET),  # benchc's own stylesheet: raw text in <style>
            sections=sections,
            figures=_figures(svgs),
            by_status=_by_status(doc["verdicts"].get("items") or []),
            cards={it["id"]: it.get("anchor") for it in doc.get("drilldown") or []},
            lacking=lacking,
            t2=_table2(doc),
            order_table=_by_position(doc),
            vsi={"tables": vsi_tables(doc), "doc": doc},
            state_labels=STATE_LABELS,
            regime_labels=REGIME_LABELS,
            table_vi_heads=TABLE_VI_HEADS,
            drill_note=drill_note,
            vsi_insensitive=VSI_INSENSITIVE,
        )
    )
