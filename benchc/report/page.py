"""The page: the report document and its SVG figures as one self-contained HTML file.

Inline CSS, inline SVG, thumbnails as data URIs, no script and no network: the file opens
from disk and as a CI artifact. Sections carry ``class="report-section"`` and figures
``class="fig"`` so a browser test can count what rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchc.metrics.figures import table2_figures
from benchc.report.fmt import e, f, reference_series
from benchc.report.plots import PLOTS, STATE_LABELS
from benchc.report.vsi_page import lacks as _lacks
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
.v-none{background:#f3f5f7;border:1px solid #aaa}figure.fig{margin:10px 0;overflow-x:auto}
figure.fig svg{max-width:100%;height:auto}ul.movers{margin:2px 0;padding-left:16px}
td p.reason,td p.mdr-note{margin:0 0 2px}header ul{margin:4px 0 0;font-size:12px;color:#c8d6e5}
figcaption{font-size:12px;color:#555}
pre{background:#f3f5f7;padding:8px;overflow-x:auto;font-size:12px}.se{color:#777;font-size:11px}
.note{font-size:12px;color:#666}.cards{display:flex;flex-wrap:wrap;gap:14px}.card{border:1px
solid #d0d7de;border-radius:6px;padding:8px;width:370px;font-size:12px}.card img{width:112px;
height:auto;border:1px solid #ccc;image-rendering:pixelated}.thumbs{display:flex;gap:6px}
.thumbs div{text-align:center;font-size:10px;color:#555}.bar{height:8px;background:#1f77b4;
display:inline-block}.bar.x{background:#d62728}.opt{display:grid;grid-template-columns:
14px 1fr 90px 90px;gap:2px 6px;align-items:center;margin-top:4px}.opt .ans{font-weight:bold}
"""

#: Failed gates listed by name in the verdict box (all of them are in the table).
FAIL_LIST = 12
#: Verdict statuses folded into a <details> under the table.
FOLDED = ("improved", "pass")
SECTIONS: tuple[tuple[str, str], ...] = (
    ("verdict", "Verdict"),
    ("table2", "Model-level robustness (Bench-C Table II)"),
    ("states", "Four-state diagnosis (Bench-C Table III)"),
    ("heatmaps", "Corruption x severity"),
    ("severity", "Severity trajectories per family (Bench-C Fig. 7)"),
    ("plane", "RAS component plane and sign regimes (Bench-C Fig. 5, Table IV)"),
    ("trajectories", "Trajectory composition (Bench-C Fig. 6)"),
    ("vsi", "Visual sensitivity (VSI Tables 1-3, Fig. 1, Fig. 2)"),
    ("drilldown", "Samples that moved most"),
)
#: A compare page's extra section, right after Table II.
AGREEMENT = ("agreement", "Cross-run agreement (VSI Sec. 2.3, Bench-C Tables VI and V)")
#: Table VI column headers, by metric.
TABLE_VI_HEADS = {"accuracy": "Abs.", "d_acc": "ΔAcc", "relative_robustness": "Rel.", "ras": "RAS"}


# -- sections ----------------------------------------------------------------------------------
def _verdict(doc: dict[str, Any]) -> str:
    vb = doc["verdicts"]
    if not vb["available"]:
        return f'<div class="verdict-box v-none">{e(vb["note"])}</div>'
    items = vb["items"]
    fails = [v for v in items if v.get("status") == "fail"]
    counts = ", ".join(f"{n} {e(k)}" for k, n in sorted(vb["counts"].items()))
    out = []
    if fails:
        out.append(
            f'<div class="verdict-box v-fail"><b>{len(fails)} gate(s) failed</b> ({counts}).<ul>'
        )
        for v in fails[:FAIL_LIST]:
            out.append(
                f'<li><a class="gate-link" href="#{e(v["anchor"])}">{e(v.get("label"))} in '
                f"{e(v.get('scope'))}</a>: {f(v.get('baseline'))} → {f(v.get('current'))} "
                f"(change {f(v.get('change'), signed=True)}, tolerance {f(v.get('tolerance'))}, "
                f"MDR {f(v.get('mdr'))})</li>"
            )
        out.append("</ul>")
        if len(fails) > FAIL_LIST:
            out.append(f"… and {len(fails) - FAIL_LIST} more failed gates in the table below.")
        if vb.get("record_command"):
            out.append(
                "If the change is intended, re-record the baseline with:"
                f"<pre>{e(vb['record_command'])}</pre>"
            )
        out.append("</div>")
    else:
        out.append(f'<div class="verdict-box v-ok"><b>No gate failed</b> ({counts}).</div>')
    unchecked = [v for v in items if v.get("status") == "unchecked"]
    if unchecked:  # a gate that did not run is never silent
        out.append(
            f'<p class="note"><b>{len(unchecked)} gate(s) could not be checked</b>: '
            + "; ".join(
                f"{e(v.get('scope'))}: {e(v.get('reason') or 'no reason given')}"
                for v in unchecked[:5]
            )
            + (" …" if len(unchecked) > 5 else "")
            + "</p>"
        )
    if vb.get("note"):
        out.append(f'<p class="note">{e(vb["note"])}</p>')
    head = (
        '<tr><th class="l">status</th><th class="l">gate</th>'
        '<th class="l">scope</th><th>baseline</th><th>current</th><th>change</th>'
        '<th>tolerance</th><th>MDR</th><th>SE diff</th><th>z</th><th class="l">better</th>'
        '<th class="l">reason / movers</th></tr>'
    )
    rows = [f'<table id="verdict-table">{head}']
    rows += [_verdict_row(v) for v in items if v.get("status") not in FOLDED]
    rows.append("</table>")
    for status in FOLDED:  # folded away: what needs action stays on top
        group = [v for v in items if v.get("status") == status]
        if group:
            rows.append(
                f'<details id="{status}-gates"><summary>{len(group)} {status} gates</summary>'
                f'<table class="{status}">{head}{"".join(_verdict_row(v) for v in group)}'
                "</table></details>"
            )
    return "\n".join(out + rows)


def _verdict_row(v: dict[str, Any]) -> str:
    st = str(v.get("status"))
    movers = "".join(
        f"<li>{e(m[0])}: {f(m[1], 2)} → {f(m[2], 2)}</li>" for m in (v.get("movers") or [])[:3]
    )
    notes = (("reason", e(v.get("reason") or "")), ("mdr-note", e(v.get("note") or "")))
    why = "".join(f'<p class="{cls}">{text}</p>' for cls, text in notes if text)
    why += f'<ul class="movers">{movers}</ul>' if movers else ""
    return (
        f'<tr id="{e(v["anchor"])}" class="{e(st)}"><td class="l"><span class="badge '
        f'b-{e(st)}">{e(st)}</span></td><td class="l">{e(v.get("label"))}</td>'
        f'<td class="l">{e(v.get("scope"))} <span class="se">{e(v.get("level"))}</span></td>'
        f"<td>{f(v.get('baseline'))}</td><td>{f(v.get('current'))}</td>"
        f"<td>{f(v.get('change'), signed=True)}</td><td>{f(v.get('tolerance'))}</td>"
        f"<td>{f(v.get('mdr'))}</td><td>{f(v.get('se_diff'))}</td>"
        f'<td>{f(v.get("z"), 2)}</td><td class="l">{e(v.get("direction"))}</td>'
        f'<td class="l">{why}</td></tr>'
    )


def _compare_note(doc: dict[str, Any]) -> str:
    """What a comparison shares, what it left out, and its sign convention."""
    c = doc.get("compare")
    if not c:
        return ""
    where = (
        f"compared on {len(c['corruptions'])} corruptions x severities "
        f"{', '.join(map(str, c['severities']))}"
        if c["corruptions"]
        else "no Bench-C grid shared"
    )
    if c.get("n_samples") is not None:
        where += f" and {c['n_samples']} shared samples"
    left = "".join(f"<li>{e(x)}</li>" for x in c["left_out"])
    return (
        f'<p id="compare-note">{e(where)}; differences are {e(c["sign"])} (the first run is '
        f"the baseline).</p>" + (f'<ul id="left-out">{left}</ul>' if left else "")
    )


def _table2(doc: dict[str, Any]) -> str:
    head = "".join(f"<th>{e(label)}</th>" for label in (f.column for f in table2_figures()))
    rows = [f'<table id="table2-table"><tr><th class="l">series</th>{head}</tr>']
    series = [s for s in doc["series"] if s.get("table2")]
    for s in series:
        cells = []
        for key in (fig.key for fig in table2_figures()):
            x = s["table2"].get(key)
            digits = 1 if key == "mixed_cell_rate" else 3
            if x is None or x.get("value") is None:
                cells.append("<td>n/a</td>")
                continue
            se = f' <span class="se">±{f(x["se"], digits)}</span>' if x.get("se") else ""
            cells.append(f"<td>{f(x['value'], digits)}{se}</td>")
        rows.append(
            f'<tr><td class="l">{e(s["label"])} <span class="se">{e(s["kind"])}'
            f"</span></td>{''.join(cells)}</tr>"
        )
    base = reference_series(series)
    for cand in (s for s in series if base is not None and s is not base):
        cells = []
        for key in (fig.key for fig in table2_figures()):
            x, y = cand["table2"].get(key), base["table2"].get(key)
            ok = x and y and x.get("value") is not None and y.get("value") is not None
            digits = 1 if key == "mixed_cell_rate" else 3
            diff = f(x["value"] - y["value"], digits, signed=True) if ok else "n/a"
            cells.append(f"<td>{diff}</td>")
        rows.append(
            f'<tr class="diff"><td class="l">{e(cand["label"])} − {e(base["label"])}</td>'
            f"{''.join(cells)}</tr>"
        )
    rows.append(
        '</table><p class="note">± : bootstrap SE over samples. RAS, ΔS, ΔC: means '
        "over every clean-corrupted pair; R_c / R_w: over clean-correct / clean-wrong "
        "pairs; Mixed: % of cells with R_c &lt; 0 and R_w &gt; 0 (a cell R within 1e-6 of 0 "
        "has no sign). Differences: candidate − baseline.</p>"
    )
    return "\n".join(rows)


def _missing(doc: dict[str, Any], block: str) -> str:
    names = [s["label"] for s in doc["series"] if not s.get(block)]
    if not names:
        return ""
    return (
        f'<p class="note">not available for: {e(", ".join(names))} (a snapshot keeps '
        "per-cell figures, not the per-pair arrays this needs)</p>"
    )


def _states(doc: dict[str, Any]) -> str:
    out = []
    for s in doc["series"]:
        t = s.get("states")
        if not t:
            continue
        out.append(
            f'<table class="states"><tr><th class="l">{e(s["label"])}</th><th>share</th>'
            "<th>cond. rate</th><th>ΔAcc</th><th>RAS</th><th>ΔS</th><th>ΔC</th>"
            "<th>pairs</th></tr>"
        )
        for k, st in enumerate(t["states"]):
            share = t["share"][k]
            rate = t["cond_rate"][k]
            out.append(
                f'<tr><td class="l">{e(STATE_LABELS[st])}</td>'
                f"<td>{'n/a' if share is None else f'{100 * share:.2f}%'}</td>"
                f"<td>{'n/a' if rate is None else f'{100 * rate:.2f}%'}</td>"
                f"<td>{t['d_acc'][k]:+d}</td><td>{f(t['ras'][k], signed=True)}</td>"
                f"<td>{f(t['d_s'][k], signed=True)}</td><td>{f(t['d_c'][k], signed=True)}</td>"
                f"<td>{t['count'][k]}</td></tr>"
            )
        pi = t["pi"]
        out.append(
            f'</table><p class="note">π_c = {f(pi[0])}, π_w = {f(pi[1])}; R_c = '
            f"{f(t['r_c'], signed=True)}, R_w = {f(t['r_w'], signed=True)}</p>"
        )
    out.append(_missing(doc, "states"))
    return "\n".join(out)


def _regimes(doc: dict[str, Any]) -> str:
    labels = {
        "worse_flatter": "ΔC&gt;0 worse, ΔS&gt;0 flatter",
        "worse_sharper": "ΔC&gt;0 worse, ΔS&lt;0 sharper",
        "better_flatter": "ΔC&lt;0 better, ΔS&gt;0 flatter",
        "better_sharper": "ΔC&lt;0 better, ΔS&lt;0 sharper",
        "boundary": "boundary",
    }
    out = ["<h3>Sign regimes (Bench-C Table IV)</h3>"]
    for s in doc["series"]:
        t = s.get("regimes")
        if not t:
            continue
        out.append(
            f'<table class="regimes"><tr><th class="l">{e(s["label"])}</th><th>mean ΔC'
            "</th><th>mean ΔS</th><th>mean RAS</th><th>share</th><th>pairs</th></tr>"
        )
        for k, name in enumerate(t["regimes"]):
            share = t["share"][k]
            out.append(
                f'<tr><td class="l">{labels.get(name, e(name))}</td>'
                f"<td>{f(t['mean_d_c'][k], signed=True)}</td>"
                f"<td>{f(t['mean_d_s'][k], signed=True)}</td>"
                f"<td>{f(t['mean_ras'][k], signed=True)}</td>"
                f"<td>{'n/a' if share is None else f'{100 * share:.2f}%'}</td>"
                f"<td>{t['count'][k]}</td></tr>"
            )
        out.append("</table>")
    out.append(_missing(doc, "regimes"))
    return "\n".join(out)


def _p(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2g}"


def _vsi_agreement(v: dict[str, Any]) -> str:
    out = ["<h3>VSI rank agreement (VSI Sec. 2.3, App. B.2)</h3>"]
    if v["pairs"]:
        out.append(
            '<table id="vsi-agreement"><tr><th class="l">runs</th><th>shared n</th>'
            "<th>Spearman ρ</th><th>95% CI</th><th>p</th><th>low-VSI Jaccard</th>"
            '<th>low a / b</th><th class="l">note</th></tr>'
        )
        for q in v["pairs"]:
            ci = q.get("ci")
            out.append(
                f'<tr><td class="l">{e(q["a"])} vs {e(q["b"])}</td><td>{q["n_shared"]}</td>'
                f"<td>{f(q['rho'], signed=True)}</td>"
                f"<td>{'n/a' if not ci else f'[{f(ci[0])}, {f(ci[1])}]'}</td>"
                f"<td>{_p(q['p_value'])}</td><td>{f(q['jaccard_low'])}</td>"
                f"<td>{q['n_low_a']} / {q['n_low_b']}</td>"
                f'<td class="l">{e(q.get("note") or "")}</td></tr>'
            )
        out.append("</table>")
    out.append(
        f'<p class="note">{e(v["note"]) + ". " if v.get("note") else ""}Per-sample VSI '
        "matched by sample id; p: two-sided permutation test over pairings "
        f"({v['n_permutations']:,} shuffles, seed {v['permutation_seed']}); CI: percentile "
        f"bootstrap over the shared ids (B = {v['n_boot']}, seed {v['bootstrap_seed']}); "
        f"low VSI: VSI &lt; {v['low_vsi']:g}.</p>"
    )
    return "".join(out)


def _table_vi(t: dict[str, Any]) -> str:
    out = ["<h3>Rank mismatch across metrics (Bench-C Table VI)</h3>"]
    if t["available"]:
        heads = "".join(f"<th>{e(TABLE_VI_HEADS.get(m, m))}↑</th>" for m in t["metrics"])
        out.append(f'<table id="table6"><tr><th class="l">run</th>{heads}</tr>')
        ref = t["metrics"].index(t["reference"])
        for i, name in enumerate(t["models"]):
            cells = []
            for j in range(len(t["metrics"])):
                rank, dr = t["ranks"][i][j], t["shift"][i][j]
                sup = f"{rank}" if j == ref else f"{rank}, {dr:+d}"
                tone = (
                    ""
                    if j == ref or not dr
                    else (' style="color:#b00"' if dr > 0 else ' style="color:#00b"')
                )
                cells.append(f"<td{tone}>{f(t['scores'][i][j], signed=True)}<sup>{sup}</sup></td>")
            out.append(f'<tr><td class="l">{e(name)}</td>{"".join(cells)}</tr>')
        out.append(
            '</table><p class="note">Rows in RAS order; superscripts: rank (1 best) and '
            "Δr = r_RAS − r_m (red: the metric ranks the run higher than RAS does).</p>"
        )
    if t.get("note"):
        out.append(f'<p class="note">{e(t["note"])}</p>')
    return "".join(out)


def _table_v(t: dict[str, Any]) -> str:
    out = ["<h3>Logit vs sampling RAS (Bench-C Table V)</h3>"]
    for q in t["pairs"]:
        if "logit_row" not in q:
            out.append(f'<p class="note">{e(q["logit"])} vs {e(q["sampling"])}: {e(q["note"])}</p>')
            continue
        out.append(
            '<table class="table5"><tr><th class="l">run</th><th>samples</th><th>Acc<sup>(o)'
            "</sup>↑</th><th>ΔAcc↑</th><th>RAS↑</th></tr>"
        )
        for lab, kind, row in (
            (q["logit"], q["logit_access"], q["logit_row"]),
            (q["sampling"], "sampling", q["sampling_row"]),
        ):
            out.append(
                f'<tr><td class="l">{e(lab)} <span class="se">{e(kind)}</span></td>'
                f"<td>{e(row['samples'])}</td><td>{f(row['acc_clean'])}</td>"
                f"<td>{f(row['d_acc'], signed=True)}</td><td>{f(row['ras'], signed=True)}</td></tr>"
            )
        d = q["difference"]
        out.append(
            f'<tr><td class="l">sampling − logit</td><td></td><td>{f(d["acc_clean"], signed=True)}'
            f"</td><td>{f(d['d_acc'], signed=True)}</td><td>{f(d['ras'], signed=True)}</td></tr>"
            f'</table><p class="note">{e(q["model"])} on {q["n_shared"]} shared samples and '
            f"{len(q['corruptions'])} × {len(q['severities'])} shared cells; clean top-1 "
            f"agreement {f(q['top1_agreement'])}, Spearman ρ of cell RAS "
            f"{f(q['cell_ras_rho'], signed=True)}.</p>"
        )
    if t.get("note"):
        out.append(f'<p class="note">{e(t["note"])}</p>')
    out.append(f'<p class="note">Pairing: {e(t["rule"])}.</p>')
    return "".join(out)


def _agreement(doc: dict[str, Any]) -> str:
    a = doc["agreement"]
    return _vsi_agreement(a["vsi"]) + _table_vi(a["table_vi"]) + _table_v(a["table_v"])


def _bars(p: Sequence[float | None], answer: int, pred: int, cls: str) -> list[str]:
    return [
        f'<span><span class="bar {cls}" style="width:{max(1, round(60 * (x or 0)))}px"></span> '
        f"{f(x, 2)}{'*' if k == pred else ''}</span>"
        for k, x in enumerate(p)
    ]


def _drilldown(doc: dict[str, Any], note: str | None) -> str:
    items = doc.get("drilldown") or []
    if not items:
        return '<p class="note">no samples to show (no complete grid)</p>'
    out = []
    if note:
        out.append(f'<p class="note">thumbnails unavailable: {e(note)}</p>')
    out.append('<div class="cards">')
    for it in items:
        th = it.get("thumbnails")
        # the cell the card explains: its gate's cell, else the sample's worst (see drill.py)
        cell, basis = it.get("cell") or it["worst_cell"], it.get("cell_basis") or "worst"
        imgs = ""
        if th:
            imgs = (
                '<div class="thumbs">'
                + "".join(
                    f'<div><img class="thumb-{k}" alt="{e(k)} {e(it["id"])}" src="{th[k]}"'
                    f"{at}><br>{e(lab)}</div>"
                    for k, lab, at in (
                        ("clean", "clean", ""),
                        ("corrupted", cell, f' data-cell="{e(cell)}"'),
                        ("blurred", "region blur", ""),
                    )
                )
                + "</div>"
            )
        gate = it.get("gate")
        link = (
            f' (<a class="card-gate" href="#{e(gate["anchor"])}">gate row</a>)'
            if gate and basis == "gate"
            else ""
        )
        which = f'<p class="se cell-note">{e(it.get("cell_note") or "")}{link}</p>'
        worst = ""
        if it["worst_cell"] != cell:
            worst = f"; grid's worst: {e(it['worst_cell'])} {f(it['ras_worst'], signed=True)}"
        ras_cell = it.get("ras_cell", it["ras_worst"])
        opts = it.get("options") or [f"option {i}" for i in range(len(it["p_clean"]))]
        clean_b = _bars(it["p_clean"], it["answer"], it["pred_clean"], "")
        corr_b = _bars(it["p_corrupted"], it["answer"], it["pred_corrupted"], "x")
        grid = "".join(
            f'<span class="{"ans" if k == it["answer"] else ""}">{chr(65 + k)}</span>'
            f'<span class="{"ans" if k == it["answer"] else ""}">{e(opts[k])}</span>'
            f"{clean_b[k]}{corr_b[k]}"
            for k in range(len(it["p_clean"]))
        )
        base = it.get("baseline_mean_ras")
        v = it.get("vsi")
        vsi_line = (
            f'<p class="card-vsi">VSI (the gate\'s support): baseline {f(v["baseline"], 4)} → '
            f"current {f(v['current'], 4)} (insensitive below {VSI_INSENSITIVE:g})</p>"
            if v
            else ""
        )
        out.append(
            f'<div class="card" id="sample-{e(it["id"])}" data-cell="{e(cell)}" '
            f'data-cell-basis="{e(basis)}"><b>{e(it["id"])}</b> '
            f'<span class="se">{e(it["why"])}</span>{imgs}{which}{vsi_line}'
            f"<p>{e(it.get('question') or '(question not available)')}</p>"
            f'<div class="opt"><span></span><span></span><span class="se">clean</span>'
            f'<span class="se">{e(cell)}</span>{grid}</div>'
            f'<p class="se">RAS in {e(cell)}: {f(ras_cell, signed=True)}{worst}; '
            f"mean RAS {f(it['mean_ras'], signed=True)}"
            f"{'' if base is None else f' (baseline {base:+.3f})'}; answer "
            f"{chr(65 + it['answer'])} (bold), * = predicted; "
            f"{e((th or {}).get('blur_note', ''))}</p></div>"
        )
    out.append("</div>")
    return "\n".join(out)


# -- the page ----------------------------------------------------------------------------------
def render(doc: dict[str, Any], svgs: dict[str, str], *, drill_note: str | None = None) -> str:
    """The complete HTML page."""
    by_section: dict[str, list[str]] = {}
    for key, svg in svgs.items():
        section, caption, _ = PLOTS[key]
        by_section.setdefault(section, []).append(
            f'<figure class="fig" id="fig-{e(key)}" data-figure="{e(key)}">{svg}'
            f"<figcaption>{e(caption)}</figcaption></figure>"
        )
    extra = {
        "verdict": _verdict(doc),
        "table2": _table2(doc),
        "states": _states(doc),
        "plane_after": _regimes(doc),
        "trajectories": _missing(doc, "trajectories"),
        "plane": _missing(doc, "plane"),
        "vsi": vsi_tables(doc),
        "drilldown": _drilldown(doc, drill_note),
    }
    sections = list(SECTIONS)
    if doc.get("agreement"):
        extra[AGREEMENT[0]] = _agreement(doc)
        sections.insert(2, AGREEMENT)
    meta = " · ".join(
        f"{e(s['label'])}: {e(s['model'])} on {e(s['dataset'])} (n={e(s['n'])}, {e(s['kind'])})"
        + (f' from <span class="source">{e(s["source"])}</span>' if s.get("source") else "")
        for s in doc["series"]
    )
    nav = "".join(f'<a href="#{key}">{e(title.split(" (")[0])}</a>' for key, title in sections)
    body = []
    for key, title in sections:
        parts = [extra.get(key, ""), *by_section.get(key, [])]
        if key == "plane":
            parts.append(extra["plane_after"])
        if key == "vsi" and not by_section.get("vsi"):
            parts = ['<p class="note">no VSI arrays stored for this run</p>', _lacks(doc)]
        body.append(
            f'<section class="report-section" id="{key}"><h2>{e(title)}</h2>'
            f"{''.join(parts)}</section>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<title>{e(doc["title"])}</title><meta name="generator" content="{e(doc["schema"])}">'
        f"<style>{CSS}</style></head><body><header><h1>{e(doc['title'])}</h1><p>{meta}</p>"
        f"<p>{e(doc.get('baseline_note', ''))}</p>{_compare_note(doc)}</header>"
        f"<nav>{nav}</nav><main>"
        + "\n".join(body)
        + f'</main><footer class="note" style="padding:0 24px 20px">{e(doc["schema"])} · '
        "the same numbers are in report.json</footer></body></html>\n"
    )
