"""The gates' part of the terminal summary: the engine's verdict with its reasons under
headings, then what the records add (gate counts, the budget, switched-off, kept and improved
gates, powerless gates, each model-level gate's power on this dataset).

Pure: the verdict (:class:`benchc.gates.verdict.Overall`) and the gate records in, lines out, so
the summary is testable without a pytest run and reads the same records as the report.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from benchc.gates.verdict import counted, powerless_gates

if TYPE_CHECKING:
    from benchc.gates.verdict import Overall

Record = dict[str, Any]
#: The order statuses are counted in the ``gates:`` line.
STATUSES = ("pass", "fail", "unresolved", "improved", "unchecked", "kept", "off")


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def _details(records: Sequence[Record]) -> list[str]:
    lines = [f"OFF {r['figure']} in {r['scope']}: {r['reason']}" for r in records
             if r["status"] == "off"]  # fmt: skip
    lines += [f"KEPT {r['case']}: {r['reason']}" for r in records if r["status"] == "kept"]
    improved = [r for r in records if r["status"] == "improved"]
    if improved:
        lines.append(f"{len(improved)} figure(s) improved beyond tolerance (not failures; "
                     "--snapshot-update records them):")  # fmt: skip
        lines += [f"  {r['figure']} in {r['scope']}: {_fmt(r['baseline'])} -> "
                  f"{_fmt(r['current'])}" for r in improved]  # fmt: skip
    powerless = powerless_gates(records)  # the verdict's own count
    if powerless:  # one line for all of them; each one's numbers: the report
        lines.append(f"POWERLESS {len(powerless)} gate(s) cannot fail on this dataset "
                     f"({counted(powerless)}); each one's numbers: the report")  # fmt: skip
    return lines


def _mdr_table(records: Sequence[Record]) -> list[str]:
    grid = [r for r in records if r.get("level") in ("model", "vsi") and r.get("mdr") is not None]
    if not grid:
        return []
    return ["minimal detectable regression of the model-level gates (z, floor):"] + [
        f"  {r['figure']:<22} MDR {_fmt(r['mdr']):>8}  (z {_fmt(r['z'])}, floor "
        f"{r['floor']:g}, n={r.get('n')})" + (f"; {r['note']}" if r.get("note") else "")
        for r in grid
    ]


def gate_summary(
    records: Sequence[Record], budget_line: str | None = None, *, overall: Overall | None = None
) -> list[str]:
    """Lines for the ``benchc`` summary section (empty when there is no verdict and no gate
    ran): the engine's verdict (``overall``) first, then the records' details."""
    records = [r for r in records if r["status"] != "recorded"]  # recording's own block
    if overall is None and not records:
        return []
    if overall is None:
        from benchc.gates.engine import run_verdict

        overall = run_verdict(records)
    by = Counter(r["status"] for r in records)
    lines = list(overall.lines()) if overall is not None else []
    if records:
        lines.append("gates: " + ", ".join(f"{by[s]} {s}" for s in STATUSES if by[s]))
    if budget_line and records:
        lines.append(budget_line)
    return lines + _details(records) + _mdr_table(records)
