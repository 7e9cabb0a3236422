"""The VSI section's tables (docs/spec.md §5), one row per series: Table 1 (the distribution of
each perturbation variant), both VSI supports side by side with the gated one named, Table 2
(the encoder-LLM disconnect on the low-VSI pool) and Table 3 (error signals with 95 %
bootstrap intervals, calibration). The numbers are ``report.json``'s ``series[*].vsi``; the
markup is templates/vsi.html.j2's."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from benchc.report.fmt import f, pct
from benchc.report.vsi import SIGNALS

_POOL = {
    "own": "own",
    "reference": "reference's",
    "own (the reference has other samples)": "own (other samples)",
}


def _series(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(s["label"], s["vsi"]) for s in doc["series"] if s.get("vsi")]


Cell = str | tuple[str, str | None]
"""A table cell: text, or (text, interval) with the interval set in a grey span."""
Head = tuple[str, bool]
"""A column head and whether its column is left-aligned."""


def _ci(row: dict[str, Any], key: str) -> Cell:
    lo, hi = row.get(f"{key}_ci") or (None, None)
    if lo is None:
        return (f"{f(row.get(key))} ", None)
    return (f(row.get(key)), f"[{f(lo, 2)}, {f(hi, 2)}]")


def _table(
    table_id: str, heads: list[Head], rows: list[list[Cell]], note: str | Markup
) -> dict[str, Any]:
    """One table for templates/vsi.html.j2: its heads, rows of cells and the note under it."""
    return {"id": table_id, "heads": heads, "rows": rows, "note": note}


def _heads(names: list[str]) -> list[Head]:
    """Heads from names, a leading ``<`` marking a left-aligned column."""
    return [(h[1:], True) if h.startswith("<") else (h, False) for h in names]


def table1(doc: dict[str, Any]) -> dict[str, Any]:
    """VSI Table 1: per variant the median, shares below 0.01 / 0.05, dip p, silhouette."""
    rows: list[list[Cell]] = [
        [label, r["variant"], str(r["n"]), f(r["median"], 4), pct(r["below_001"]),
         pct(r["below_005"]), f(r["dip_p"], 2), f(r["silhouette"], 2)]
        for label, v in _series(doc)
        for r in v.get("table1") or []
    ]  # fmt: skip
    heads = [("series", True), ("variant", True), *_heads(["n", "median"]),
             ("<0.01", False), ("<0.05", False), *_heads(["dip p", "silhouette"])]  # fmt: skip
    return _table("vsi-table1", heads, rows,
                  "Table 1 of the VSI paper for each perturbation of this run (patch occlusion is "
                  "not computed). Dip test and silhouette (1-D 2-means) on log10 VSI.")  # fmt: skip


def supports(doc: dict[str, Any]) -> dict[str, Any]:
    """Both VSI supports side by side; the gated one marked."""
    rows: list[list[Cell]] = [
        [label, sup, f(r["median"], 4), pct(r["insensitive_fraction"]),
         f(r["gap"], signed=True), str(_POOL.get(r.get("gap_pool", "own"), r.get("gap_pool"))),
         "gated" if r["gated"] else "reported"]
        for label, v in _series(doc)
        for sup, r in (v.get("variants") or {}).items()
    ]  # fmt: skip
    heads = _heads(["<series", "<support", "median", "insensitive", "gap", "<gap's pool",
                    "<gates"])  # fmt: skip
    return _table("vsi-supports", heads, rows,
                  Markup("full: KL over the whole vocabulary; top50: over the union of both top-50 "
                  "supports, each side's own probabilities (the VSI paper's reported numbers; a "
                  "server's top-k is estimated and named so); <code>--vsi-support</code> picks "
                  "the gated one, whose gap is the gate's and Table 2's."))  # fmt: skip


def _pm(g: dict[str, Any], key: str) -> Cell:
    std = g.get(f"{key}_std")
    return (f(g.get(key)), None if std is None else f"±{f(std, 2)}")


def table2(doc: dict[str, Any]) -> dict[str, Any]:
    """VSI Table 2: the disconnect on the low-VSI pool and its matched high-VSI control."""
    rows: list[list[Cell]] = []
    for label, v in _series(doc):
        g = v["gap"]
        pool = g.get("pool", "own")
        rows.append([
            label, str(_POOL.get(pool, pool)), str(g.get("n_low")), _pm(g, "probe_low"),
            _pm(g, "probe_high"), f(g.get("change_low")), f(g.get("change_high")),
            f(g.get("gap"), signed=True),
        ])  # fmt: skip
    heads = _heads(["<series", "<pool", "n low", "probe acc (low)", "probe acc (high)",
                    "Δargmax (low)", "Δargmax (high)", "gap"])  # fmt: skip
    return _table("vsi-table2", heads, rows,
                  "Probe: L2 logistic regression (C = 1) on l2-normalised own-tower features, "
                  "fitted on the pool alone with 5 folds grouped by image (± fold std); high: the "
                  "matched control (as many of the most sensitive samples). gap = probe acc (low) "
                  "− Δargmax (low). The pool is the baseline's (in a comparison, the first run's) "
                  "when that model has the same samples, as a gate reads it.")  # fmt: skip


def table3(doc: dict[str, Any]) -> dict[str, Any]:
    """VSI Table 3: AUROC and PRR@80 of each signal, with 95 % bootstrap intervals."""
    rows: list[list[Cell]] = []
    for label, v in _series(doc):
        t = v.get("signals")
        if not t:
            continue
        sig = t["signals"]
        rows.append([
            label, str(t["n"]), f(t["accuracy"]),
            *(_ci(sig[k], "auroc") for k in SIGNALS), *(_ci(sig[k], "prr80") for k in SIGNALS),
            SIGNALS.get(t.get("best") or "", "n/a"), f(t["ece"]), f(t["brier"]),
        ])  # fmt: skip
    labels = list(SIGNALS.values())
    heads = _heads(["<series", "n", "acc", *(f"AUROC {lab}" for lab in labels),
                    *(f"PRR@80 {lab}" for lab in labels), "<best", "ECE", "Brier"])  # fmt: skip
    return _table("vsi-table3", heads, rows,
                  "Errors and confidences are the VSI pass's own clean option answers (argmax p, "
                  "max p). Risk scores: −max p, −VSI_r, −VSI_w and the equal-weight sum of their "
                  "z-scores; [95 % interval over 1000 bootstrap resamples, seed 42]. ECE over 10 "
                  "equal-width bins (reliability diagram below).")  # fmt: skip


def vsi_tables(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every VSI table of the page, in the paper's order (each series' missing parts follow,
    templates/vsi.html.j2's ``lacks``: a gap in the page is explained, never silent)."""
    return [table1(doc), supports(doc), table2(doc), table3(doc)]
