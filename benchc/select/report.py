"""Writing a selected dataset with its selection report (JSON for tools, Markdown for people)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from benchc.data.fingerprint import fingerprint
from benchc.data.native import save_jsonl
from benchc.data.sample import Dataset
from benchc.select.core import SelectionRun, build_report, per_sample_rows
from benchc.select.pool import composition_markdown

REPORT_JSON = "selection_report.json"
REPORT_MD = "selection_report.md"
SCORES_JSONL = "selection_scores.jsonl"


def _num(x: Any, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.{digits}f}" if isinstance(x, float) else str(x)


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown tables (what a reviewer reads in the pull request)."""
    lines = [
        "# Selection report",
        "",
        f"Pool {report['n_pool']} -> eligible (A+) {report['n_eligible']} -> "
        f"selected {report['n_selected']} (e > {_num(report['e_threshold'])}).",
        "",
    ]
    meta = dict(report.get("run", {}))
    composition = meta.pop("pool_composition", None)
    if meta:
        lines += ["## Run", ""] + [f"- {k}: `{v}`" for k, v in meta.items()] + [""]
    if composition:
        lines += ["## Pool composition", "", *composition_markdown(composition), ""]
    lines += [
        "## Selectors",
        "",
        "| selector | clean acc (pool) | clean acc (selected) | selected clean-correct / wrong |",
        "|---|---|---|---|",
    ]
    for s in report["selectors"]:
        lines.append(
            f"| {s['name']} | {_num(s['clean_accuracy_pool'])} | "
            f"{_num(s['clean_accuracy_selected'])} | "
            f"{s['selected_clean_correct']} / {s['selected_clean_wrong']} |"
        )
    bins = report["kappa_bins"]
    lines += ["", "## kappa distribution (before / after)", ""]
    lines += ["| kappa bin | pool | eligible | selected |", "|---|---|---|---|"]
    k = report["kappa"]
    for i in range(len(bins) - 1):
        lines.append(
            f"| [{bins[i]:.1f}, {bins[i + 1]:.1f}) | {k['pool']['histogram'][i]} | "
            f"{k['eligible']['histogram'][i]} | {k['selected']['histogram'][i]} |"
        )
    lines.append(
        f"| mean / median | {_num(k['pool']['mean'])} / {_num(k['pool']['median'])} | "
        f"{_num(k['eligible']['mean'])} / {_num(k['eligible']['median'])} | "
        f"{_num(k['selected']['mean'])} / {_num(k['selected']['median'])} |"
    )
    lines += ["", "## Category shift", ""]
    lines += ["| category | pool | eligible | selected | share shift |", "|---|---|---|---|---|"]
    counts, shift = report["category_counts"], report["category_shift"]
    for c in shift:
        lines.append(
            f"| {c} | {counts['pool'].get(c, 0)} | {counts['eligible'].get(c, 0)} | "
            f"{counts['selected'].get(c, 0)} | {shift[c]:+.3f} |"
        )
    lines += ["", "## Leave-one-selector-out (Table I)", ""]
    if report["leave_one_selector_out"]:
        lines += [
            "| removed | fixed JI | fixed retained | recomputed JI | recomputed retained |",
            "|---|---|---|---|---|",
        ]
        for r in report["leave_one_selector_out"]:
            lines.append(
                f"| {r['removed']} | {_num(r['fixed_ji'])} | {r['fixed_retained']}/"
                f"{r['n_selected']} | {_num(r['recomputed_ji'])} | "
                f"{r['recomputed_retained']}/{r['n_selected']} |"
            )
    else:
        lines.append("Needs at least two selectors; not computed.")
    lines += [
        "",
        "Inconsistency-only vs semantic-only selection Jaccard: "
        f"{_num(report['inconsistency_vs_semantic_ji'])}.",
        "",
        f"Answer letters of the selected set: {report['selected_answer_letters']}.",
        "",
    ]
    return "\n".join(lines)


def write_selection(
    run: SelectionRun, pool: Dataset, out: str | Path, *, run_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Write the selected samples (pool order, native format) plus report files into ``out``."""
    out = Path(out)
    chosen = [pool[i] for i in range(len(pool)) if run.selection.selected[i]]
    if not chosen:
        raise ValueError("selection is empty; nothing to write")
    save_jsonl(chosen, out)
    report = build_report(run)
    report["run"] = {
        **(run_info or {}),
        "pool_fingerprint": pool.fingerprint,
        "selected_fingerprint": fingerprint(chosen),
    }
    (out / REPORT_JSON).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / REPORT_MD).write_text(render_markdown(report))
    rows = per_sample_rows(run)
    (out / SCORES_JSONL).write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return report
