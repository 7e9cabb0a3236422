"""The gate engine: every gate decision of a run, made in one place.

A run (live in pytest, or a stored run re-checked by ``benchc report``) hands the engine its
cases' payloads; the engine finds each case's snapshot in the baseline (:class:`BaselineRef`,
resolved once), checks comparability and rules, runs the paired check
(:func:`benchc.gates.check`) with the run's false-alarm budget, and says what the case does:
pass, fail (with its message) or skip. At the end it makes the run's one verdict
(:mod:`benchc.gates.verdict`) and its exit code (:mod:`benchc.gates.states`), and the sequential
look's next step (:mod:`benchc.gates.looks`). The suite, ``benchc report``, ``benchc plan``, the
exporters, the step summary and JUnit are its clients: none of them decides a gate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from benchc.fsutil import display_path
from benchc.gates.baselines import BaselineRef
from benchc.gates.budget import ErrorBudget
from benchc.gates.check import Outcome, ZFor, check, describe, shared_samples
from benchc.gates.churn import churn_lines
from benchc.gates.evidence import EvidenceError, GridEvidence
from benchc.gates.facts import Facts
from benchc.gates.figures import FigureSpec, figures
from benchc.gates.looks import sequential
from benchc.gates.payload import Payload
from benchc.gates.pipeline import check_case
from benchc.gates.recording import cause, remedy
from benchc.gates.samples import SampleVerdict, sample_verdicts
from benchc.gates.states import DEFAULT_POLICY, Policy
from benchc.gates.verdict import (
    FINISHED,
    Ending,
    Overall,
    Reason,
    conclude,
    decide,
    unchecked_gates,
)

Action = Literal["pass", "fail", "skip"]
Record = dict[str, Any]


@dataclass(frozen=True)
class Commands:
    """The commands a decision prints, built by the client from its own settings (the suite's
    setting table): re-record the baseline from the released checkpoint; record one case from
    this checkpoint (its change is intended); the drill-down into one case's samples (None:
    none)."""

    record_release: Callable[[], str] = lambda: "pytest --snapshot-update"
    accept: Callable[[str], str] = lambda case: f"pytest --snapshot-update -k {case}"
    drill_down: Callable[[str, str], str | None] = lambda level, scope: None
    #: Where a failure should look first: what changed since the baseline (:mod:`benchc.gates.
    #: changes`), spliced under the failure's first line.
    look_first: Callable[[], list[str]] = lambda: []


@dataclass(frozen=True)
class CaseDecision:
    """What one case does: its gate records, and ``action`` with the ``message`` that says why
    (the failure box, or the skip reason)."""

    records: tuple[Record, ...]
    action: Action = "pass"
    message: str = ""


def identity(payload: Payload) -> tuple[str, str]:
    """A case's gate identity: its level and its scope (a cell or family), or its one figure (a
    model or VSI case): what its snapshot file is named after."""
    if payload.level in ("cell", "family"):
        return payload.level, payload.scope
    names = [*payload.figures, *(r.figure for r in payload.rules)]
    if not names:
        raise ValueError(f"{payload.level} case {payload.scope!r} gates no figure")
    return payload.level, names[0]


class SnapshotUnusable(ValueError):
    """A recorded snapshot (or its evidence) that cannot be read; the message names the file."""


def load_snapshot(path: Path) -> Payload | None:
    """The recorded snapshot at ``path`` with its verified evidence; None when there is none."""
    from benchc.gates.snapshot import load_baseline

    if not path.is_file():
        return None
    try:
        return load_baseline(path)
    except (ValueError, KeyError, EvidenceError) as exc:
        raise SnapshotUnusable(f"threshold snapshot {path} is unusable: {exc}") from exc


class GateEngine:
    """Every gate decision of one run against one baseline, under one policy and budget."""

    def __init__(
        self,
        baseline: BaselineRef,
        *,
        budget: ErrorBudget,
        policy: Policy = DEFAULT_POLICY,
        seed: int = 0,
        commands: Commands = Commands(),
    ) -> None:
        self.baseline, self.budget, self.policy = baseline, budget, policy
        self.seed, self.commands = seed, commands

    # -- one case ----------------------------------------------------------------------------
    def snapshot_path(self, payload: Payload) -> Path:
        return self.baseline.snapshot(*identity(payload))

    def decide_case(self, payload: Payload, case: str) -> CaseDecision:
        """The live suite's decision for one case (``case``: its name in records)."""
        path = self.snapshot_path(payload)
        try:
            baseline = load_snapshot(path)
        except SnapshotUnusable as exc:
            return CaseDecision(
                (), "fail", f"{exc}\nRe-record with:\n    {self.commands.record_release()}"
            )
        if baseline is None:
            return CaseDecision((), "fail", self._missing(payload.scope, path))
        result = check_case(baseline, payload, z_for=self.budget.z, seed=self.seed,
                            where=str(path))  # fmt: skip
        if result.mismatch:
            key, old, new = result.mismatch[0]
            return CaseDecision((), "fail", (
                f"threshold snapshot {path} was recorded with {key}={old!r}, this run has "
                f"{key}={new!r}; the figures are not comparable. Re-record baseline "
                f"'{self.baseline.name}' from the released checkpoint with:\n"
                f"    {self.commands.record_release()}"))  # fmt: skip
        if result.verdict is None and result.absent:
            again = self.commands.record_release()
            return CaseDecision((), "fail", (
                f"{result.problem}. Re-record baseline '{self.baseline.name}' from the "
                f"released checkpoint to gate them:\n    {again}"))  # fmt: skip
        if result.verdict is None:
            return CaseDecision((), "fail", str(result.problem))
        outcomes = result.verdict.outcomes
        records = tuple(o.to_dict(case) for o in outcomes)
        action, message = self._action(list(outcomes), payload, baseline, path, case)
        return CaseDecision(records, action, message)

    def _action(
        self, outcomes: list[Outcome], payload: Payload, baseline: Payload, path: Path, case: str
    ) -> tuple[Action, str]:
        failed = [o for o in outcomes if o.status == "fail"]
        unresolved = [o for o in outcomes if o.status == "unresolved"]
        unchecked = [o for o in outcomes if o.status == "unchecked"]
        if failed:
            return "fail", self._failure(failed, payload, baseline, path, case)
        if unresolved and self.policy.mode == "fail":
            lines = self._described(unresolved, payload, baseline)
            lines += [f"snapshot: {path} (baseline {self.baseline.label})",
                      f"UNRESOLVED under {self._flag()}: more samples (the line above says how "
                      "many) resolve it; "
                      "`benchc plan` sizes a dataset for a target regression",
                      self._accept(case)]  # fmt: skip
            return "fail", "\n".join(lines)
        if unchecked:
            text = "; ".join(f"{o.spec.name}: {o.reason}" for o in unchecked)
            if self.policy.strict:
                undefined = [
                    o for o in unchecked if "undefined on the baseline" in (o.reason or "")
                ]
                fixes = [
                    f"{cause(o.spec.name, o.reason, baseline)}\nfix: "
                    f"{remedy(o.spec.name, o.reason, path, baseline)}"
                    for o in undefined
                ]
                return "fail", "\n".join(
                    [f"gate(s) could not be checked (--strict-gates): {text}", *fixes]
                )
            if len(unchecked) == len(outcomes):
                return "skip", f"gate(s) could not be checked: {text}"
        return "pass", ""

    def _flag(self) -> str:
        return "--inconclusive=fail" if self.policy.inconclusive == "fail" else "--strict-gates"

    def _described(self, outcomes: list[Outcome], payload: Payload, baseline: Payload) -> list[str]:
        """The gates' own text, what changed since the baseline under its first line, and the
        churn beside a negative-flip gate (:mod:`benchc.gates.churn`)."""
        lines = [line for o in outcomes for line in describe(o, payload)]
        lines[1:1] = self.commands.look_first()
        return lines + churn_lines(outcomes, baseline, payload)

    def _failure(
        self, failed: list[Outcome], payload: Payload, baseline: Payload, path: Path, case: str
    ) -> str:
        lines = self._described(failed, payload, baseline)
        lines.append(f"snapshot: {path} (baseline {self.baseline.label})")
        drill = self.commands.drill_down(payload.level, payload.scope)
        if drill:
            lines.append(f"drill down: {drill}")
        lines.append(self._accept(case))
        return "\n".join(lines)

    def _accept(self, case: str) -> str:
        return (
            f"if this change is intended and this checkpoint becomes baseline "
            f"'{self.baseline.name}': {self.commands.accept(case)}"
        )

    def _missing(self, scope: str, path: Path) -> str:
        return (
            f"baseline {self.baseline.label} has no snapshot of case {scope} (expected {path}): "
            f"it was recorded over other cells, or before this gate existed. Record them from "
            f"the released checkpoint:\n    {self.commands.record_release()}"
        )

    def decide_sample(
        self, cell_key: str, sample_id: str, current: GridEvidence, case: str = ""
    ) -> CaseDecision:
        """Drill-down (``--per-sample``): one sample of cell ``current`` (one-cell evidence)
        against the cell snapshot's evidence, with the sample's own benign tolerance and its
        share of the false-alarm budget (:mod:`benchc.gates.samples`)."""
        path = self.baseline.snapshot("cell", cell_key)
        try:
            cell = load_snapshot(path)
        except SnapshotUnusable as exc:
            return CaseDecision((), "fail", str(exc))
        if cell is None or cell.evidence is None:
            return CaseDecision((), "fail", self._missing(cell_key, path))
        if sample_id not in cell.evidence.ids:
            return CaseDecision((), "fail", f"sample {sample_id!r} is not in {path}")
        z = self.budget.z("sample")
        key = (cell.evidence.digest, current.digest, z, self.seed)
        if key not in _SAMPLES:  # one computation per cell, not per sample
            _SAMPLES.clear()
            base, _ = shared_samples(cell.evidence, current)  # a --limit run: its samples
            _SAMPLES[key] = sample_verdicts(base, current, z=z, seed=self.seed)  # type: ignore[arg-type]
        v = _SAMPLES[key][sample_id]
        (spec,) = figures("sample", gated_only=True)
        record = (sample_record(case, f"{cell_key}:{sample_id}", spec, v),)
        if v.status == "fail":
            why = v.reason or v.describe(spec)
            return CaseDecision(record, "fail", f"sample {sample_id} in {cell_key}: {why}")
        if v.status != "unchecked":
            return CaseDecision(record)
        if self.policy.strict:
            why = f"sample {sample_id} in {cell_key}: {v.reason} (--strict-gates)"
            return CaseDecision(record, "fail", why)
        # one reason text for every such sample: pytest's -rs summary counts them in one line
        why = (v.reason or "unchecked").partition(":")[0]
        return CaseDecision(
            record, "skip", f"{why} (per-sample drill-down; the sample is in the test id)"
        )

    # -- a stored run ------------------------------------------------------------------------
    def check_stored(
        self, cases: Mapping[str, Payload], case_name: Callable[[str], str]
    ) -> list[Record]:
        """Every gate of a stored run's cases (``benchc report``): the records the live suite
        would have made; a case without a usable snapshot is one ``unchecked`` record."""
        records: list[Record] = []
        for key, current in cases.items():
            case = case_name(key)
            path = self.snapshot_path(current)
            try:
                baseline = load_snapshot(path)
            except SnapshotUnusable as exc:
                records.append(unchecked_record(case, key, str(exc.__cause__ or exc)))
                continue
            if baseline is None:
                records.append(
                    unchecked_record(case, key, f"no threshold snapshot {display_path(path)}")
                )
                continue
            result = check_case(baseline, current, z_for=self.budget.z, seed=self.seed,
                                where=display_path(path))  # fmt: skip
            if result.verdict is None:
                records.append(unchecked_record(case, key, str(result.problem)))
                continue
            records.extend(o.to_dict(case) for o in result.verdict.outcomes)
        return records

    # -- the run -----------------------------------------------------------------------------
    def verdict(
        self, records: Iterable[Record], *, facts: Facts | None = None, ending: Ending = FINISHED
    ) -> Overall:
        """The run's one verdict (:func:`run_verdict` under this engine's policy and budget)."""
        return run_verdict(records, policy=self.policy, facts=facts, ending=ending,
                           budget=self.budget)  # fmt: skip


def run_verdict(
    records: Iterable[Record],
    *,
    policy: Policy = DEFAULT_POLICY,
    facts: Facts | None = None,
    ending: Ending = FINISHED,
    budget: ErrorBudget | None = None,
) -> Overall:
    """The one verdict of a run: its gate records decided (:func:`benchc.gates.verdict.decide`),
    then how the run ended (:func:`benchc.gates.verdict.conclude`)."""
    records = [r for r in records if r.get("status") != "recorded"]
    decision = None
    if budget is not None and budget.looks > 1:  # a group-sequential look: early PASS, or not
        records, decision = sequential(records, budget)
    overall = decide(records, facts, policy=policy)
    if decision is not None and decision.verdict == "PASS" and overall.state == "pass":
        early = Reason("sequential", decision.message())
        overall = replace(overall, reasons=(*overall.reasons, early))
    return conclude(overall, ending)


def recording_verdict(
    records: Iterable[Record] = (), *, policy: Policy = DEFAULT_POLICY, ending: Ending = FINISHED
) -> Overall:
    """The verdict of a recording (``--snapshot-update``): RECORDED, with the gates it could
    not check listed, unless a case raised or could not be recorded (the baseline is
    incomplete), the run stopped, or a fault outside the model ended it."""
    records = list(records)
    counts = {s: sum(1 for r in records if r.get("status") == s) for s in ("recorded", "kept")}
    listed = tuple(unchecked_gates(records))
    return conclude(Overall("recorded", listed, counts, policy=policy), ending)


def with_mdrs(payload: Payload, *, z_for: ZFor, seed: int) -> Payload:
    """``payload`` with each gated figure's minimal detectable regression under its own rules
    (what a recording writes into the snapshot: a hand-edited floor changes it)."""
    from dataclasses import replace

    outcomes = check(payload, payload, z_for=z_for, seed=seed).outcomes
    mdr = {o.spec.name: o.mdr for o in outcomes}
    figs = {k: replace(f, mdr=mdr.get(k, math.nan)) for k, f in payload.figures.items()}
    return replace(payload, figures=figs)


def sample_record(case: str, scope: str, spec: FigureSpec, v: SampleVerdict) -> Record:
    """One sample's verdict as a gate record (what the run's verdict and summary count)."""

    def num(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    return {"case": case, "scope": scope, "level": "sample", "figure": spec.name,
            "label": spec.label, "direction": spec.direction, "status": v.status,
            "baseline": num(v.baseline), "current": num(v.current),
            "change": num(v.current - v.baseline), "tolerance": num(v.tolerance),
            "z": num(v.z), "floor": spec.floor, "reason": v.reason}  # fmt: skip


#: The last cell's per-sample verdicts (cases of one cell run one after another).
_SAMPLES: dict[tuple, dict[str, SampleVerdict]] = {}


def unchecked_record(case: str, key: str, reason: str) -> Record:
    """A case that could not be checked at all, as one record (no gate goes unchecked
    silently)."""
    level, _, scope = key.partition(":")
    return {"case": case, "scope": scope or key, "level": level, "figure": None,
            "status": "unchecked", "reason": reason}  # fmt: skip


__all__ = [
    "CaseDecision", "Commands", "GateEngine", "SnapshotUnusable", "identity", "load_snapshot",
    "recording_verdict", "run_verdict", "unchecked_record", "with_mdrs",
]  # fmt: skip
