"""The gates' part of the terminal summary: what failed, what could not be checked, what was
kept, what improved, and each model-level gate's power on this dataset.

Pure: verdict records (:meth:`benchc.gates.Outcome.to_dict`) in, lines out, so the summary is
testable without a pytest run and reads the same records as the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

Record = dict[str, Any]


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def gate_summary(records: Sequence[Record], budget_line: str | None = None) -> list[str]:
    """Lines for the ``benchc`` summary section (empty when no gate ran)."""
    if not records:
        return []
    by = Counter(r["status"] for r in records)
    lines = [
        "gates: " + ", ".join(f"{by[s]} {s}" for s in ("pass", "fail", "improved", "unchecked",
                                                         "kept") if by[s])
    ]  # fmt: skip
    if budget_line:
        lines.append(budget_line)
    for r in records:
        if r["status"] == "fail":
            lines.append(
                f"FAIL {r['figure']} in {r['scope']}: {_fmt(r['baseline'])} -> "
                f"{_fmt(r['current'])} (tolerance {_fmt(r['tolerance'])}, MDR {_fmt(r['mdr'])})"
                + (f"; {r['note']}" if r.get("note") else "")
            )
    for r in records:
        if r["status"] == "unchecked":
            lines.append(f"UNCHECKED {r.get('figure', '?')} in {r['scope']}: {r['reason']}")
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
    powerless = [r for r in records if r.get("reason", "") and "cannot fail" in r["reason"]]
    for r in powerless:
        lines.append(f"POWERLESS {r['figure']} in {r['scope']}: {r['reason']}")
    grid = [r for r in records if r.get("level") in ("model", "vsi") and r.get("mdr") is not None]
    if grid:
        lines.append("minimal detectable regression of the model-level gates (z, floor):")
        lines.extend(
            f"  {r['figure']:<22} MDR {_fmt(r['mdr']):>8}  (z {_fmt(r['z'])}, floor "
            f"{r['floor']:g}, n={r['n']})" + (f"; {r['note']}" if r.get("note") else "")
            for r in grid
        )
    return lines
