"""The VSI section's tables (docs/spec.md §5), one row per series: Table 1 (the distribution of
each perturbation variant), both VSI supports side by side with the gated one named, Table 2
(the encoder-LLM disconnect on the low-VSI pool) and Table 3 (error signals with 95 %
bootstrap intervals, calibration). The numbers are ``report.json``'s ``series[*].vsi``."""

from __future__ import annotations

from typing import Any

from benchc.report.fmt import e, f, pct
from benchc.report.vsi import SIGNALS

_POOL = {
    "own": "own",
    "reference": "reference's",
    "own (the reference has other samples)": "own (other samples)",
}


def _series(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(s["label"], s["vsi"]) for s in doc["series"] if s.get("vsi")]


def _ci(row: dict[str, Any], key: str) -> str:
    lo, hi = row.get(f"{key}_ci") or (None, None)
    interval = f'<span class="se">[{f(lo, 2)}, {f(hi, 2)}]</span>' if lo is not None else ""
    return f"{f(row.get(key))} {interval}"


def table1(doc: dict[str, Any]) -> str:
    """VSI Table 1: per variant the median, shares below 0.01 / 0.05, dip p, silhouette."""
    rows = [
        '<table id="vsi-table1"><tr><th class="l">series</th><th class="l">variant</th>'
        "<th>n</th><th>median</th><th>&lt;0.01</th><th>&lt;0.05</th><th>dip p</th>"
        "<th>silhouette</th></tr>"
    ]
    for label, v in _series(doc):
        for r in v.get("table1") or []:
            rows.append(
                f'<tr><td class="l">{e(label)}</td><td class="l">{e(r["variant"])}</td>'
                f"<td>{r['n']}</td><td>{f(r['median'], 4)}</td><td>{pct(r['below_001'])}</td>"
                f"<td>{pct(r['below_005'])}</td><td>{f(r['dip_p'], 2)}</td>"
                f"<td>{f(r['silhouette'], 2)}</td></tr>"
            )
    rows.append(
        '</table><p class="note">Table 1 of the VSI paper for each perturbation of this run '
        "(patch occlusion is not computed). Dip test and silhouette (1-D 2-means) on log10 VSI."
        "</p>"
    )
    return "".join(rows)


def supports(doc: dict[str, Any]) -> str:
    """Both VSI supports side by side; the gated one marked."""
    rows = [
        '<table id="vsi-supports"><tr><th class="l">series</th><th class="l">support</th>'
        "<th>median</th><th>insensitive</th><th>gap</th><th class='l'>gates</th></tr>"
    ]
    for label, v in _series(doc):
        for sup, r in (v.get("variants") or {}).items():
            rows.append(
                f'<tr><td class="l">{e(label)}</td><td class="l">{e(sup)}</td>'
                f"<td>{f(r['median'], 4)}</td><td>{pct(r['insensitive_fraction'])}</td>"
                f"<td>{f(r['gap'], signed=True)}</td>"
                f'<td class="l">{"gated" if r["gated"] else "reported"}</td></tr>'
            )
    rows.append(
        '</table><p class="note">full: KL over the whole vocabulary; top50: over the union of '
        "both top-50 supports (the VSI paper's reported numbers); <code>--vsi-support</code> "
        "picks the gated one.</p>"
    )
    return "".join(rows)


def table2(doc: dict[str, Any]) -> str:
    """VSI Table 2: the disconnect on the low-VSI pool and its matched high-VSI control."""
    rows = [
        '<table id="vsi-table2"><tr><th class="l">series</th><th class="l">pool</th>'
        "<th>n low</th><th>probe acc (low)</th><th>probe acc (high)</th><th>Δargmax (low)</th>"
        "<th>Δargmax (high)</th><th>gap</th></tr>"
    ]
    for label, v in _series(doc):
        g = v["gap"]

        def pm(key: str, g: dict[str, Any] = g) -> str:
            std = g.get(f"{key}_std")
            return f(g.get(key)) + (
                f' <span class="se">±{f(std, 2)}</span>' if std is not None else ""
            )

        rows.append(
            f'<tr><td class="l">{e(label)}</td>'
            f'<td class="l">{e(_POOL.get(g.get("pool", "own"), g.get("pool", "own")))}</td>'
            f"<td>{g.get('n_low')}</td><td>{pm('probe_low')}</td><td>{pm('probe_high')}</td>"
            f"<td>{f(g.get('change_low'))}</td><td>{f(g.get('change_high'))}</td>"
            f"<td>{f(g.get('gap'), signed=True)}</td></tr>"
        )
    rows.append(
        '</table><p class="note">Probe: L2 logistic regression (C = 1) on l2-normalised '
        "own-tower features, fitted on the pool alone with 5 folds grouped by image "
        "(± fold std); high: the matched control (as many of the most sensitive samples). "
        "gap = probe acc (low) − Δargmax (low). The pool is the baseline's (in a comparison, "
        "the first run's) when that model has the same samples, as a gate reads it.</p>"
    )
    return "".join(rows)


def table3(doc: dict[str, Any]) -> str:
    """VSI Table 3: AUROC and PRR@80 of each signal, with 95 % bootstrap intervals."""
    head = "".join(f"<th>AUROC {e(lab)}</th>" for lab in SIGNALS.values())
    head += "".join(f"<th>PRR@80 {e(lab)}</th>" for lab in SIGNALS.values())
    rows = [
        f'<table id="vsi-table3"><tr><th class="l">series</th><th>n</th><th>acc</th>{head}'
        '<th class="l">best</th><th>ECE</th><th>Brier</th></tr>'
    ]
    for label, v in _series(doc):
        t = v.get("signals")
        if not t:
            continue
        sig = t["signals"]
        cells = "".join(f"<td>{_ci(sig[k], 'auroc')}</td>" for k in SIGNALS)
        cells += "".join(f"<td>{_ci(sig[k], 'prr80')}</td>" for k in SIGNALS)
        best = SIGNALS.get(t.get("best") or "", "n/a")
        rows.append(
            f'<tr><td class="l">{e(label)}</td><td>{t["n"]}</td><td>{f(t["accuracy"])}</td>'
            f'{cells}<td class="l">{e(best)}</td><td>{f(t["ece"])}</td>'
            f"<td>{f(t['brier'])}</td></tr>"
        )
    rows.append(
        '</table><p class="note">Errors and confidences are the VSI pass\'s own clean option '
        "answers (argmax p, max p). Risk scores: −max p, −VSI_r, −VSI_w and the equal-weight "
        "sum of their z-scores; [95 % interval over 1000 bootstrap resamples, seed 42]. "
        "ECE over 10 equal-width bins (reliability diagram below).</p>"
    )
    return "".join(rows)


def lacks(doc: dict[str, Any]) -> str:
    """One line per series that could not give everything (server runs: no tower, top-k
    VSI, no VSI), so a gap in the page is explained, never silent."""
    return "".join(
        f'<p class="note missing">{e(s["label"])} lacks: {e("; ".join(s["missing"]))}</p>'
        for s in doc["series"]
        if s.get("missing")
    )


def vsi_tables(doc: dict[str, Any]) -> str:
    """Every VSI table of the page, in the paper's order."""
    return table1(doc) + supports(doc) + table2(doc) + table3(doc) + lacks(doc)
