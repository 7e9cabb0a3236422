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


def _table(table_id: str, heads: list[str], rows: list[list[str]], note: str) -> str:
    """One table: ``heads`` (a leading ``<`` marks a left-aligned column, as are the first two),
    ``rows`` of ready cell HTML, and the note under it."""
    left = [h.startswith("<") for h in heads]
    th = "".join(
        f'<th class="l">{h[1:]}</th>' if is_left else f"<th>{h}</th>"
        for h, is_left in zip(heads, left, strict=True)
    )
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="l">{c}</td>' if is_left else f"<td>{c}</td>"
            for c, is_left in zip(cells, left, strict=True)
        )
        + "</tr>"
        for cells in rows
    )
    return f'<table id="{table_id}"><tr>{th}</tr>{body}</table><p class="note">{note}</p>'


def table1(doc: dict[str, Any]) -> str:
    """VSI Table 1: per variant the median, shares below 0.01 / 0.05, dip p, silhouette."""
    rows = [
        [e(label), e(r["variant"]), str(r["n"]), f(r["median"], 4), pct(r["below_001"]),
         pct(r["below_005"]), f(r["dip_p"], 2), f(r["silhouette"], 2)]
        for label, v in _series(doc)
        for r in v.get("table1") or []
    ]  # fmt: skip
    heads = ["<series", "<variant", "n", "median", "&lt;0.01", "&lt;0.05", "dip p", "silhouette"]
    return _table("vsi-table1", heads, rows,
                  "Table 1 of the VSI paper for each perturbation of this run (patch occlusion is "
                  "not computed). Dip test and silhouette (1-D 2-means) on log10 VSI.")  # fmt: skip


def supports(doc: dict[str, Any]) -> str:
    """Both VSI supports side by side; the gated one marked."""
    rows = [
        [e(label), e(sup), f(r["median"], 4), pct(r["insensitive_fraction"]),
         f(r["gap"], signed=True), e(_POOL.get(r.get("gap_pool", "own"), r.get("gap_pool"))),
         "gated" if r["gated"] else "reported"]
        for label, v in _series(doc)
        for sup, r in (v.get("variants") or {}).items()
    ]  # fmt: skip
    heads = ["<series", "<support", "median", "insensitive", "gap", "<gap's pool", "<gates"]
    return _table("vsi-supports", heads, rows,
                  "full: KL over the whole vocabulary; top50: over the union of both top-50 "
                  "supports, each side's own probabilities (the VSI paper's reported numbers; a "
                  "server's top-k is estimated and named so); <code>--vsi-support</code> picks "
                  "the gated one, whose gap is the gate's and Table 2's.")  # fmt: skip


def _pm(g: dict[str, Any], key: str) -> str:
    std = g.get(f"{key}_std")
    return f(g.get(key)) + (f' <span class="se">±{f(std, 2)}</span>' if std is not None else "")


def table2(doc: dict[str, Any]) -> str:
    """VSI Table 2: the disconnect on the low-VSI pool and its matched high-VSI control."""
    rows = []
    for label, v in _series(doc):
        g = v["gap"]
        pool = g.get("pool", "own")
        rows.append([
            e(label), e(_POOL.get(pool, pool)), str(g.get("n_low")), _pm(g, "probe_low"),
            _pm(g, "probe_high"), f(g.get("change_low")), f(g.get("change_high")),
            f(g.get("gap"), signed=True),
        ])  # fmt: skip
    heads = ["<series", "<pool", "n low", "probe acc (low)", "probe acc (high)",
             "Δargmax (low)", "Δargmax (high)", "gap"]  # fmt: skip
    return _table("vsi-table2", heads, rows,
                  "Probe: L2 logistic regression (C = 1) on l2-normalised own-tower features, "
                  "fitted on the pool alone with 5 folds grouped by image (± fold std); high: the "
                  "matched control (as many of the most sensitive samples). gap = probe acc (low) "
                  "− Δargmax (low). The pool is the baseline's (in a comparison, the first run's) "
                  "when that model has the same samples, as a gate reads it.")  # fmt: skip


def table3(doc: dict[str, Any]) -> str:
    """VSI Table 3: AUROC and PRR@80 of each signal, with 95 % bootstrap intervals."""
    rows = []
    for label, v in _series(doc):
        t = v.get("signals")
        if not t:
            continue
        sig = t["signals"]
        rows.append([
            e(label), str(t["n"]), f(t["accuracy"]),
            *(_ci(sig[k], "auroc") for k in SIGNALS), *(_ci(sig[k], "prr80") for k in SIGNALS),
            e(SIGNALS.get(t.get("best") or "", "n/a")), f(t["ece"]), f(t["brier"]),
        ])  # fmt: skip
    labels = [e(lab) for lab in SIGNALS.values()]
    heads = ["<series", "n", "acc", *(f"AUROC {lab}" for lab in labels),
             *(f"PRR@80 {lab}" for lab in labels), "<best", "ECE", "Brier"]  # fmt: skip
    return _table("vsi-table3", heads, rows,
                  "Errors and confidences are the VSI pass's own clean option answers (argmax p, "
                  "max p). Risk scores: −max p, −VSI_r, −VSI_w and the equal-weight sum of their "
                  "z-scores; [95 % interval over 1000 bootstrap resamples, seed 42]. ECE over 10 "
                  "equal-width bins (reliability diagram below).")  # fmt: skip


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
