"""CI-native outputs of the gate verdicts: junitxml properties and a GitHub step summary.

A verdict is the gates' JSON-able dict (``case``, ``scope``, ``level``, ``figure``, ``label``,
``direction``, ``baseline``, ``current``, ``change``, ``tolerance``, ``mdr``, ``se_diff``,
``floor``, ``z``, ``status``, ``reason``, ``movers``). ``record`` puts every number of one
verdict on the test's ``user_properties`` (so ``--junitxml`` carries them); ``step_summary``
writes the Markdown table that ``$GITHUB_STEP_SUMMARY`` shows on the workflow run page.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from benchc.gates.engine import run_verdict
from benchc.gates.verdict import Overall

#: Verdict keys copied to junitxml properties, one property each.
NUMBERS: tuple[str, ...] = (
    "baseline",
    "current",
    "change",
    "tolerance",
    "mdr",
    "se_diff",
    "floor",
    "z",
    "z_change",
    "resolve_n",
)
SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
#: The step summary's mark of each verdict state (:mod:`benchc.gates.verdict`).
STATE_ICONS = {
    "fail": "❌", "unresolved": "⚠️", "inconclusive": "⚠️", "pass": "✅", "none": "",
    "crashed": "💥", "interrupted": "⏹️", "infra": "🔌", "recorded": "📝",
}  # fmt: skip
_ORDER = {"fail": 0, "unresolved": 1, "improved": 2, "unchecked": 3, "pass": 4}


def _clean(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def properties(verdict: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(name, value)`` pairs for one verdict: ``benchc.<figure>.<key>`` per number, the
    status, and the whole verdict as JSON (``benchc.<figure>.verdict``)."""
    fig = str(verdict.get("figure", "figure"))
    out: list[tuple[str, Any]] = [(f"benchc.{fig}.status", str(verdict.get("status")))]
    for key in NUMBERS:
        value = _clean(verdict.get(key))
        out.append((f"benchc.{fig}.{key}", "" if value is None else value))
    clean = {k: _clean(v) for k, v in verdict.items()}
    out.append((f"benchc.{fig}.verdict", json.dumps(clean, sort_keys=True, default=str)))
    return out


#: The two sides of a gate run: ``candidate``, ``candidate_source``, ``baseline``,
#: ``baseline_source`` (JUnit ``benchc.candidate``, ``benchc.candidate.source``, ...).
SIDES: tuple[str, ...] = ("candidate", "candidate_source", "baseline", "baseline_source")


def side_properties(sides: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``benchc.candidate``, ``benchc.candidate.source``, ``benchc.baseline``,
    ``benchc.baseline.source``: which model was gated against which baseline."""
    return [(f"benchc.{k.replace('_', '.')}", str(sides[k])) for k in SIDES if k in sides]


def suite_properties(overall: Overall) -> list[tuple[str, str]]:
    """The run's verdict as JUnit ``<testsuite>`` properties: ``benchc.verdict`` (the state),
    ``benchc.verdict.headline`` and ``benchc.verdict.reason.<i>`` (one per reason)."""
    out = [("benchc.verdict", overall.state), ("benchc.verdict.headline", overall.headline)]
    out += [(f"benchc.verdict.reason.{i}", r.text) for i, r in enumerate(overall.reasons, 1)]
    return out


def record(node: Any, verdict: Mapping[str, Any], sides: Mapping[str, Any] | None = None) -> None:
    """Attach one verdict's numbers (and, once per test, the two sides) to a test item
    (``node.user_properties``)."""
    if sides:
        have = {name for name, _ in node.user_properties}
        node.user_properties.extend(p for p in side_properties(sides) if p[0] not in have)
    node.user_properties.extend(properties(verdict))


def sides_line(sides: Mapping[str, Any] | None) -> str | None:
    """``candidate **x** (`src`) against baseline **y** (`src`)`` for the step summary."""
    if not sides:
        return None
    return (
        f"candidate **{sides.get('candidate')}** (`{sides.get('candidate_source')}`) against "
        f"baseline **{sides.get('baseline')}** (`{sides.get('baseline_source')}`)"
    )


def _f(x: Any, signed: bool = False) -> str:
    x = _clean(x)
    if x is None:
        return "n/a"
    return f"{x:+.4f}" if signed else f"{x:.4f}"


def step_summary(
    verdicts: Sequence[Mapping[str, Any]],
    *,
    report: str | None = None,
    sides: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    overall: Overall | None = None,
) -> str:
    """The Markdown verdict table: the run's verdict (``overall``, default decided from
    ``verdicts`` alone) with its reasons, the two sides, failures first, then improvements;
    passes counted; ``notes`` (a smoke run, a baseline from another environment) one line
    each."""
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[str(v.get("status"))] = counts.get(str(v.get("status")), 0) + 1
    head = ", ".join(
        f"{n} {k}" for k, n in sorted(counts.items(), key=lambda t: _ORDER.get(t[0], 9))
    )
    overall = overall or run_verdict(verdicts)
    lines = [
        f"## benchc robustness gates: {STATE_ICONS.get(overall.state, '')} {overall.headline}",
        "",
        *(f"- {r.text}" for r in overall.reasons),
        *([""] if overall.reasons else []),
        f"{len(verdicts)} gates: {head or 'none'}",
        "",
    ]
    line = sides_line(sides)
    if line:
        lines[2:2] = [line, ""]
    for note in notes:
        lines += [f"> {note}", ""]
    shown = sorted(
        (v for v in verdicts if v.get("status") not in ("pass", "recorded")),
        key=lambda v: (_ORDER.get(str(v.get("status")), 9), str(v.get("case", ""))),
    )
    if shown:
        lines += [
            "| status | gate | scope | baseline | current | change | tolerance | MDR |",
            "|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for v in shown:
            label = str(v.get("label") or v.get("figure")).replace("|", "\\|")
            lines.append(
                f"| {v.get('status')} | {label} | {v.get('scope')} | {_f(v.get('baseline'))} | "
                f"{_f(v.get('current'))} | {_f(v.get('change'), True)} | "
                f"{_f(v.get('tolerance'))} | {_f(v.get('mdr'))} |"
            )
    if report:
        lines += ["", f"Full report: `{report}` (uploaded as the workflow's artifact)."]
    return "\n".join(lines) + "\n"


def write_step_summary(
    verdicts: Sequence[Mapping[str, Any]],
    *,
    report: str | None = None,
    environ: Mapping[str, str] | None = None,
    sides: Mapping[str, Any] | None = None,
    notes: Sequence[str] = (),
    overall: Overall | None = None,
) -> Path | None:
    """Append :func:`step_summary` to ``$GITHUB_STEP_SUMMARY`` when it is set."""
    target = (os.environ if environ is None else environ).get(SUMMARY_ENV)
    if not target:
        return None
    path = Path(target)
    text = step_summary(verdicts, report=report, sides=sides, notes=notes, overall=overall)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(text)
    return path
