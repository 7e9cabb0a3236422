"""The gates' part of the terminal summary: what failed, what could not be checked, what was
kept, what improved, and each model-level gate's power on this dataset.

Pure: verdict records (:meth:`benchc.gates.Outcome.to_dict`) in, lines out, so the summary is
testable without a pytest run and reads the same records as the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from benchc.report.overall import Overall

Record = dict[str, Any]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _counted(records: Sequence[Record]) -> str:
    """``"ras: 95 cell, 5 family; r_c: 3 cell"``: how many gates of each figure and level."""
    by: dict[str, Counter[str]] = {}
    for r in records:
        by.setdefault(str(r.get("figure")), Counter())[str(r.get("level"))] += 1
    return "; ".join(
        f"{fig}: " + ", ".join(f"{n} {lvl}" for lvl, n in sorted(c.items()))
        for fig, c in sorted(by.items())
    )


def gate_summary(
    records: Sequence[Record],
    budget_line: str | None = None,
    *,
    overall: Overall | None = None,
    errored: Sequence[Record] = (),
) -> list[str]:
    """Lines for the ``benchc`` summary section (empty when no gate ran and no gated case
    raised): the run's verdict (``overall``, :mod:`benchc.report.overall`; default decided from
    ``records`` and the ``errored`` cases) with its reasons first, then the gates."""
    records = [r for r in records if r["status"] != "recorded"]  # recording's own block
    if not records and not errored:
        return []
    from benchc.report.overall import (
        decide,
        group_failures,
        grouped_text,
        powerless_gates,
        with_errors,
    )

    overall = overall or with_errors(decide(records), errored)
    by = Counter(r["status"] for r in records)
    lines = [
        *overall.lines(),
        "gates: " + ", ".join(f"{by[s]} {s}" for s in ("pass", "fail", "unresolved", "improved",
                                                         "unchecked", "kept", "off") if by[s]),
    ]  # fmt: skip
    if budget_line:
        lines.append(budget_line)
    grouped, plain = group_failures([r for r in records if r["status"] == "fail"])
    lines.extend(f"FAIL {grouped_text(why, group)}" for why, group in grouped.items())
    for r in plain:
        if r["status"] == "fail":
            lines.append(
                f"FAIL {r['figure']} in {r['scope']}: {_fmt(r['baseline'])} -> "
                f"{_fmt(r['current'])} (tolerance {_fmt(r['tolerance'])}, MDR {_fmt(r['mdr'])})"
                + (f"; {r['note']}" if r.get("note") else "")
            )
    unchecked: dict[str, list[Record]] = {}
    for r in records:
        if r["status"] == "unchecked":
            unchecked.setdefault(str(r["reason"]), []).append(r)
    for reason, group in unchecked.items():  # one line per reason, not per gate
        what = (
            f"{group[0].get('figure', '?')} in {group[0]['scope']}"
            if len(group) == 1
            else f"{len(group)} gates ({_counted(group)})"
        )
        lines.append(f"UNCHECKED {what}: {reason}")
    for r in records:
        if r["status"] == "off":
            lines.append(f"OFF {r['figure']} in {r['scope']}: {r['reason']}")
    for r in records:
        if r["status"] == "kept":
            lines.append(f"KEPT {r['case']}: {r['reason']}")
    improved = [r for r in records if r["status"] == "improved"]
    if improved:
        lines.append(
            f"{len(improved)} figure(s) improved beyond tolerance (not failures; "
            "--snapshot-update records them):"
        )
        lines.extend(
            f"  {r['figure']} in {r['scope']}: {_fmt(r['baseline'])} -> {_fmt(r['current'])}"
            for r in improved
        )
    powerless = powerless_gates(records)  # the verdict's own count
    if powerless:  # one line for all of them; each one's numbers: the report
        lines.append(
            f"POWERLESS {len(powerless)} gate(s) cannot fail on this dataset "
            f"({_counted(powerless)}); each one's numbers: the report"
        )
    grid = [r for r in records if r.get("level") in ("model", "vsi") and r.get("mdr") is not None]
    if grid:
        lines.append("minimal detectable regression of the model-level gates (z, floor):")
        lines.extend(
            f"  {r['figure']:<22} MDR {_fmt(r['mdr']):>8}  (z {_fmt(r['z'])}, floor "
            f"{r['floor']:g}, n={r.get('n')})" + (f"; {r['note']}" if r.get("note") else "")
            for r in grid
        )
    return lines
