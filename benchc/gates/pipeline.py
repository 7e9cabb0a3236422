"""One case, baseline against current: the gate pipeline the live suite and the offline report
both run, so a case is comparable, checked and counted by the same rules in either.

:func:`check_case` decides comparability (:data:`SETTINGS_KEYS`), checks the snapshot's rules
and calls the one decision, :func:`benchc.gates.check`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from benchc.gates.check import Verdict, ZFor, check
from benchc.gates.payload import Payload
from benchc.gates.rules import RuleError, check_rules

#: Info keys that must agree for a comparison to mean anything (else: re-record).
SETTINGS_KEYS: tuple[str, ...] = ("dataset_fingerprint", "image_size", "seed", "vsi_variant")
#: Info keys that may differ but are said in every verdict of the case when they do: the
#: scikit-learn release splits the probe's folds (GroupKFold assignments change between
#: releases, docs/spec.md §5), which moves a gap by far less than its floor.
NOTE_KEYS: tuple[str, ...] = ("sklearn",)
#: Info key listing the cells a grid-level snapshot was recorded over.
GRID_KEY = "conditions"


def settings_mismatch(baseline: Payload, current: Payload) -> list[tuple[str, Any, Any]]:
    """``(key, recorded, current)`` for every setting the two sides disagree on."""
    return info_mismatch(baseline.info, current.info)


def info_mismatch(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple]:
    """:func:`settings_mismatch` of two payloads' ``info`` (a snapshot read as plain JSON)."""
    return [(k, recorded.get(k), current.get(k)) for k in SETTINGS_KEYS
            if recorded.get(k) != current.get(k)]  # fmt: skip


@dataclass(frozen=True)
class CaseResult:
    """A checked case: its verdict, or why it could not be checked (``problem``) and, for
    settings that differ, which (``mismatch``)."""

    verdict: Verdict | None = None
    problem: str | None = None
    mismatch: tuple[tuple[str, Any, Any], ...] = ()
    #: The case's gates the snapshot has no rule for (recorded before they existed).
    absent: tuple[str, ...] = ()


def check_case(
    baseline: Payload, current: Payload, *, z_for: ZFor, seed: int, where: str
) -> CaseResult:
    """The one pipeline: comparable settings, valid rules, then the paired check."""
    mismatch = settings_mismatch(baseline, current)
    if mismatch:
        keys = ", ".join(k for k, _, _ in mismatch)
        return CaseResult(problem=f"snapshot recorded under other settings ({keys})",
                          mismatch=tuple(mismatch))  # fmt: skip
    try:
        check_rules(baseline.rules, baseline.level, where=where)
    except RuleError as exc:
        return CaseResult(problem=str(exc))
    recorded = {r.figure for r in baseline.rules}
    absent = tuple(r.figure for r in current.rules if r.figure not in recorded)
    if absent:  # never checked in silence: a gate the baseline predates is a usage error
        return CaseResult(
            problem=f"snapshot {where} predates gate(s) {', '.join(absent)} of this case (it "
            "has no rule for them; switching a gate off is a rule ending ':off')",
            absent=absent,
        )
    verdict = check(baseline, current, z_for=z_for, seed=seed)
    notes = [
        f"{k} {current.info.get(k)} here, {baseline.info.get(k)} when recorded"
        for k in NOTE_KEYS
        if k in baseline.info and baseline.info.get(k) != current.info.get(k)
    ]
    if notes:
        verdict = Verdict(verdict.scope, tuple(
            replace(o, reason="; ".join(x for x in (o.reason, *notes) if x))
            for o in verdict.outcomes
        ))  # fmt: skip
    return CaseResult(verdict=verdict)
