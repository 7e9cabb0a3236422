"""Checking one case's payload against its threshold snapshot, with actionable failures.

syrupy does the reading, writing and ``--snapshot-update``; this adds what a release engineer
needs around it: a missing snapshot says how to record one, a snapshot recorded under other
settings says so instead of reporting nonsense deltas, a failing gate prints the figure, scope,
baseline, current, tolerance, minimal detectable regression and the samples that moved most,
and no gate is ever left unchecked without a line in the summary (a failure under
``--strict-gates``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchc.gates import (
    ErrorBudget,
    EvidenceError,
    GridEvidence,
    Payload,
    RuleError,
    describe,
    figures,
    pipeline,
    sidecar,
)
from benchc.gates.check import Verdict
from benchc.gates.rules import check_rules, default_rules, merge_rules
from benchc.gates.samples import SampleVerdict, sample_verdicts
from benchc.gates.snapshot import cell_file, load_baseline, model_slug, recorded_vsi_support
from benchc.results.reader import StoredRun
from benchc.suite.config import DEFAULT_DATASET, DEFAULT_MODEL, SuiteConfig


def record_command(cfg: SuiteConfig) -> str:
    """The one command that records this model's thresholds
    (:func:`benchc.gates.pipeline.record_command` on this run's selection)."""
    settings = {k: getattr(cfg, k) for k in pipeline.RECORD_SETTINGS}
    return pipeline.record_command(settings, defaults=_DEFAULTS)


def run_record_command(run: StoredRun, thresholds_dir: Path | None = None) -> str:
    """The same command for a stored run, from its manifest (``benchc report``)."""
    m = run.manifest
    settings = {
        "model": m.get("model_spec"), "dataset": m.get("dataset_spec"),
        "corruptions": run.corruptions or None, "severities": run.severities or None,
        "image_size": m.get("settings", {}).get("image_size"), "seed": run.seed,
        "thresholds_dir": thresholds_dir,
    }  # fmt: skip
    if thresholds_dir is not None:  # keep the VSI variant the snapshots gate
        settings["vsi_support"] = recorded_vsi_support(
            Path(thresholds_dir) / model_slug(run.model_name)
        )
    return pipeline.record_command(settings, defaults=_DEFAULTS)


_DEFAULTS = {"model": DEFAULT_MODEL, "dataset": DEFAULT_DATASET}


#: Receives (case name, verdict record) for the summary, the report and JUnit properties.
Sink = Callable[[str, dict[str, Any]], None]


class GateCheck:
    """Callable bound to one test's syrupy ``snapshot`` fixture."""

    def __init__(
        self,
        snapshot: Any,
        cfg: SuiteConfig,
        node: pytest.Item,
        *,
        update: bool,
        budget: ErrorBudget,
        strict: bool = False,
        sink: Sink | None = None,
    ) -> None:
        self.snapshot, self.cfg, self.node, self.update = snapshot, cfg, node, update
        self.budget, self.strict, self.sink = budget, strict, sink

    @property
    def z_for(self):
        return self.budget.z

    @property
    def path(self) -> Path:
        return Path(
            self.snapshot.extension.get_location(test_location=self.snapshot.test_location, index=0)
        )

    def baseline(self, path: Path | None = None) -> Payload | None:
        """The recorded snapshot; None when there is none, or (under ``--snapshot-update``)
        when it is unusable and about to be replaced."""
        path = path or self.path
        if not path.is_file():
            return None
        try:
            return load_baseline(path)
        except (ValueError, KeyError, EvidenceError) as exc:
            if self.update:
                return None
            pytest.fail(
                f"threshold snapshot {path} is unusable: {exc}\nRe-record with:\n"
                f"    {record_command(self.cfg)}",
                pytrace=False,
            )

    def __call__(self, payload: Payload) -> None:
        baseline = self.baseline()
        if self.update:
            self._record(payload, baseline)
            return
        if baseline is None:
            pytest.fail(
                f"no threshold snapshot for model {payload.model!r} case {payload.scope} "
                f"(expected {self.path}).\nRecord the current figures as the baseline with:\n"
                f"    {record_command(self.cfg)}",
                pytrace=False,
            )
        result = pipeline.check_case(
            baseline, payload, z_for=self.z_for, seed=self.cfg.seed, where=str(self.path)
        )
        if result.mismatch:
            key, old, new = result.mismatch[0]
            pytest.fail(
                f"threshold snapshot {self.path} was recorded with {key}={old!r}, this run "
                f"has {key}={new!r}; the figures are not comparable. Re-record with:\n"
                f"    {record_command(self.cfg)}",
                pytrace=False,
            )
        if result.verdict is None:
            pytest.fail(str(result.problem), pytrace=False)
        verdict = result.verdict
        self._publish(verdict)
        failed = verdict.by_status("fail")
        if failed:
            lines = [line for o in failed for line in describe(o, payload)]
            lines.append(f"snapshot: {self.path}")
            lines.append(
                "if this change is intended, record it: "
                f"{record_command(self.cfg)} -k '{self.node.name}'"
            )
            pytest.fail("\n".join(lines), pytrace=False)
        unchecked = verdict.by_status("unchecked")
        if unchecked:
            text = "; ".join(f"{o.spec.name}: {o.reason}" for o in unchecked)
            if self.strict:
                pytest.fail(f"gate(s) could not be checked (--strict-gates): {text}", False)
            if len(unchecked) == len(verdict.outcomes):
                pytest.skip(f"gate(s) could not be checked: {text}")

    def unchecked(self, level: str, figure: str, reason: str) -> None:
        """Record a gate that could not even build its payload (it still gets a summary
        line: no gate goes unchecked silently)."""
        if self.sink is not None:
            self.sink(
                self.node.name,
                {"case": self.node.name, "scope": level, "level": level, "figure": figure,
                 "status": "unchecked", "reason": reason},
            )  # fmt: skip

    def _publish(self, verdict: Verdict) -> None:
        for o in verdict.outcomes:
            record = o.to_dict(self.node.name)
            if self.sink is not None:
                self.sink(self.node.name, record)

    def _record(self, payload: Payload, baseline: Payload | None) -> None:
        """``--snapshot-update``: merge rules, write the sidecar, let syrupy write the JSON.
        A grid-level snapshot recorded over more cells than this run selects is kept."""
        from benchc.suite.payloads import with_rules

        if baseline is not None and payload.level in ("model", "family"):
            old = set(baseline.info.get(pipeline.GRID_KEY) or ())
            new = set(payload.info.get(pipeline.GRID_KEY) or ())
            same_data = not pipeline.settings_mismatch(baseline, payload)
            if same_data and not old <= new:
                if self.sink is not None:
                    self.sink(
                        self.node.name,
                        {"case": self.node.name, "scope": payload.scope, "level": payload.level,
                         "status": "kept", "reason": f"recorded over {len(old)} cells, this "
                         f"run selects {len(new)}: a subset run never overwrites it"},
                    )  # fmt: skip
                return
        rules = default_rules(payload.level)
        if baseline is not None:
            try:
                check_rules(baseline.rules, baseline.level, where=str(self.path))
            except RuleError as exc:
                pytest.fail(str(exc), pytrace=False)
            rules = merge_rules(baseline.rules, payload.level)
        names = set(payload.figures)
        rules = tuple(r for r in rules if r.figure in names)
        payload = with_rules(payload, rules, z_for=self.z_for, seed=self.cfg.seed)
        if payload.evidence is not None:
            sidecar.save(self.path.parent, payload.evidence)
        assert self.snapshot == payload

    def check_sample(self, cell_key: str, sample_id: str, current: GridEvidence) -> None:
        """Drill-down: one sample of the cell ``current`` (one-cell evidence) against the cell
        snapshot's evidence, with the sample's own benign tolerance and its share of the
        false-alarm budget (:mod:`benchc.gates.samples`). No file of its own:
        ``--snapshot-update`` records samples through their cell."""
        path = self.path.parent / cell_file(cell_key)
        cell = self.baseline(path)
        if cell is None or cell.evidence is None:
            pytest.fail(
                f"no threshold snapshot {path} with evidence for cell {cell_key}; record one "
                f"with:\n    {record_command(self.cfg)}",
                pytrace=False,
            )
        if sample_id not in cell.evidence.ids:
            pytest.fail(f"sample {sample_id!r} is not in {path}", pytrace=False)
        z = self.z_for("sample")
        key = (cell.evidence.digest, current.digest, z, self.cfg.seed)
        if key not in _SAMPLES:  # one computation per cell, not per sample
            _SAMPLES.clear()
            _SAMPLES[key] = sample_verdicts(cell.evidence, current, z=z, seed=self.cfg.seed)  # type: ignore[arg-type]
        v = _SAMPLES[key][sample_id]
        (spec,) = figures("sample", gated_only=True)
        if v.status == "fail":
            why = v.reason or v.describe(spec)
            pytest.fail(f"sample {sample_id} in {cell_key}: {why}", pytrace=False)
        if v.status == "unchecked":
            if self.strict:
                pytest.fail(f"sample {sample_id} in {cell_key}: {v.reason} (--strict-gates)", False)
            pytest.skip(f"sample {sample_id} in {cell_key}: {v.reason}")


#: The last cell's per-sample verdicts (cases of one cell run one after another).
_SAMPLES: dict[tuple, dict[str, SampleVerdict]] = {}
