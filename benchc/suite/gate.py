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
from benchc.gates.baselines import BaselineRef
from benchc.gates.check import Verdict
from benchc.gates.churn import churn_lines
from benchc.gates.rules import check_rules, default_rules, merge_rules
from benchc.gates.samples import SampleVerdict, sample_verdicts
from benchc.gates.snapshot import cell_file, load_baseline, model_slug, recorded_vsi_support
from benchc.results.reader import StoredRun
from benchc.suite import changes
from benchc.suite.config import DEFAULT_DATASET, DEFAULT_MODEL, SuiteConfig
from benchc.suite.messages import command
from benchc.suite.recording import cause, remedy


def record_command(cfg: SuiteConfig, *, extra: tuple[str, ...] = ()) -> str:
    """The command that records this run's baseline (every comparability setting and the
    baseline's name: :func:`benchc.suite.messages.command`)."""
    return command(cfg, update=True, extra=extra)


def run_record_command(
    run: StoredRun,
    thresholds_dir: Path | None = None,
    *,
    baseline_folder: Path | None = None,
    vsi_dataset: str | None = None,
    release: bool = True,
) -> str:
    """The same command for a stored run, from its manifest (``benchc report``): for a
    candidate gated against another model's baseline, from the released checkpoint
    (``release``) or from the candidate itself (``release=False``: accept its change)."""
    m = run.manifest
    settings = {
        "model": m.get("model_spec"), "dataset": m.get("dataset_spec"),
        "corruptions": run.corruptions or None, "severities": run.severities or None,
        "image_size": m.get("settings", {}).get("image_size"), "seed": run.seed,
        "thresholds_dir": thresholds_dir, "results_dir": run.path.parent.parent,
        "model_args": m.get("model_args"), "vsi_dataset": vsi_dataset,
    }  # fmt: skip
    folder = baseline_folder
    if folder is None and thresholds_dir is not None:
        folder = Path(thresholds_dir) / model_slug(run.model_name)
    if folder is not None:  # keep the VSI variant the snapshots gate, and the baseline's name
        settings["vsi_support"] = recorded_vsi_support(folder)
        if baseline_folder is not None:
            settings["thresholds_dir"] = folder.parent
            settings["baseline"] = folder.name
        if release and folder.name != model_slug(run.model_name):  # record the release
            from benchc.gates.baselines import read_manifest
            from benchc.suite.messages import RELEASED

            settings["model"] = read_manifest(folder).get("model") or RELEASED
            settings["results_dir"] = None  # the release's own run, not in the candidate's
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
        baseline_ref: BaselineRef | None = None,
    ) -> None:
        self.snapshot, self.cfg, self.node, self.update = snapshot, cfg, node, update
        self.budget, self.strict, self.sink = budget, strict, sink
        self.baseline_ref = baseline_ref

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

    def _unusable_header(self) -> dict[str, Any] | None:
        """Under ``--snapshot-update``, the ``info`` of a snapshot that exists but cannot be
        loaded (its evidence is damaged or missing), when its header is this benchc's; a
        ``pytest.fail`` when its rules cannot be read. None: no such file, or not a snapshot
        of this format (re-recording it is the fix)."""
        import json

        from benchc.gates.payload import FORMAT
        from benchc.gates.rules import parse_rule

        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("benchc_snapshot") != FORMAT:
            return None
        problem = None
        try:
            for rule in data.get("rules") or ():
                parse_rule(rule)
        except (RuleError, TypeError, ValueError) as exc:
            problem = str(exc)
        if problem is not None:
            pytest.fail(
                f"{self.path}: a gate rule cannot be read ({problem}); nothing was recorded for "
                "this case: fix the rule (or delete it for the default) and record again",
                pytrace=False,
            )
        info = data.get("info")
        return info if isinstance(info, dict) else {}

    def __call__(self, payload: Payload) -> None:
        baseline = self.baseline()
        if self.update:
            self._record(payload, baseline)
            return
        if baseline is None:
            pytest.fail(self._missing(payload.scope), pytrace=False)
        result = pipeline.check_case(
            baseline, payload, z_for=self.z_for, seed=self.cfg.seed, where=str(self.path)
        )
        if result.mismatch:
            key, old, new = result.mismatch[0]
            pytest.fail(
                f"threshold snapshot {self.path} was recorded with {key}={old!r}, this run "
                f"has {key}={new!r}; the figures are not comparable. Re-record baseline "
                f"'{self.ref.name}' from the released checkpoint with:\n"
                f"    {self._record_release()}",
                pytrace=False,
            )
        if result.verdict is None:
            pytest.fail(str(result.problem), pytrace=False)
        verdict = result.verdict
        self._publish(verdict)
        failed = verdict.by_status("fail")
        if failed:
            lines = [line for o in failed for line in describe(o, payload)]
            lines[1:1] = changes.look_first(getattr(self.node, "config", None))  # look here first
            lines += churn_lines(failed, baseline, payload)
            lines.append(f"snapshot: {self.path} (baseline {self.ref.label})")
            samples = {"cell": f"test_sample and {payload.scope}", "model": "test_sample",
                       "family": f"test_sample and family:{payload.scope}"}  # fmt: skip
            if payload.level in samples:  # the gate's samples, one case each
                extra = ("--per-sample", "-k", samples[payload.level])
                lines.append("drill down: " + command(self.cfg, extra=extra))
            lines.append(self._accept_line())
            pytest.fail("\n".join(lines), pytrace=False)
        unresolved = verdict.by_status("unresolved")
        if unresolved and self.strict:  # the MDR promised to catch it: not a pass
            lines = [line for o in unresolved for line in describe(o, payload)]
            lines[1:1] = changes.look_first(getattr(self.node, "config", None))
            lines += churn_lines(unresolved, baseline, payload)
            lines.append(f"snapshot: {self.path} (baseline {self.ref.label})")
            lines.append(
                "UNRESOLVED under --strict-gates: more samples (the line above says how many) "
                "resolve it; `benchc plan` sizes a dataset for a target regression"
            )
            lines.append(self._accept_line())
            pytest.fail("\n".join(lines), pytrace=False)
        unchecked = verdict.by_status("unchecked")
        if unchecked:
            text = "; ".join(f"{o.spec.name}: {o.reason}" for o in unchecked)
            if self.strict:
                fixes = [
                    f"{cause(o.spec.name, o.reason, baseline)}\nfix: "
                    f"{remedy(o.spec.name, o.reason, self.path, baseline)}"
                    for o in unchecked
                    if "undefined on the baseline" in (o.reason or "")
                ]
                pytest.fail(
                    f"gate(s) could not be checked (--strict-gates): {text}\n" + "\n".join(fixes),
                    False,
                )
            if len(unchecked) == len(verdict.outcomes):
                pytest.skip(f"gate(s) could not be checked: {text}")

    def _accept_line(self) -> str:
        """The command that records this case from this checkpoint, when its change is
        intended (run as printed, the next gate run passes this case)."""
        return (
            f"if this change is intended and this checkpoint becomes baseline "
            f"'{self.ref.name}': {record_command(self.cfg, extra=('-k', self.node.name))}"
        )

    @property
    def ref(self) -> BaselineRef:
        """The baseline this case is checked against (its folder is :attr:`path`'s)."""
        if self.baseline_ref is not None:
            return self.baseline_ref
        return BaselineRef(self.path.parent.name, self.path.parent)

    def _record_release(self) -> str:
        from benchc.gates.baselines import read_manifest
        from benchc.suite.messages import record_release

        model = self.cfg.model if self.ref.given is None else None
        model = model or read_manifest(self.ref.folder).get("model")
        return record_release(self.cfg, self.ref, model)

    def _missing(self, scope: str) -> str:
        """A case the baseline has no snapshot of (the baseline itself exists: the run checked
        that before loading anything)."""
        return (
            f"baseline {self.ref.label} has no snapshot of case {scope} (expected "
            f"{self.path}): it was recorded over other cells. Record them from the released "
            f"checkpoint:\n    {self._record_release()}"
        )

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
        A grid-level snapshot recorded over more cells than this run selects is kept, usable
        or not; a snapshot whose rules cannot be read is never replaced (its hand edits would
        be lost silently)."""
        from benchc.suite.payloads import with_rules

        header = baseline.info if baseline is not None else self._unusable_header()
        if header is not None and payload.level in ("model", "family"):
            old = set(header.get(pipeline.GRID_KEY) or ())
            new = set(payload.info.get(pipeline.GRID_KEY) or ())
            same_data = not pipeline.info_mismatch(header, payload.info)
            if same_data and not old <= new:
                unusable = "" if baseline is not None else " (it is unusable: record all its cells)"
                if self.sink is not None:
                    self.sink(
                        self.node.name,
                        {"case": self.node.name, "scope": payload.scope, "level": payload.level,
                         "status": "kept", "reason": f"recorded over {len(old)} cells, this "
                         f"run selects {len(new)}: a subset run never overwrites it{unusable}"},
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
        if self.sink is not None:
            from benchc.suite.recording import recorded_records

            for record in recorded_records(
                self.node.name, payload, self.path, z_for=self.z_for, seed=self.cfg.seed
            ):
                self.sink(self.node.name, record)

    def check_sample(self, cell_key: str, sample_id: str, current: GridEvidence) -> None:
        """Drill-down: one sample of the cell ``current`` (one-cell evidence) against the cell
        snapshot's evidence, with the sample's own benign tolerance and its share of the
        false-alarm budget (:mod:`benchc.gates.samples`). No file of its own:
        ``--snapshot-update`` records samples through their cell."""
        path = self.path.parent / cell_file(cell_key)
        cell = self.baseline(path)
        if cell is None or cell.evidence is None:
            pytest.fail(self._missing(cell_key), pytrace=False)
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
            # one reason text for every such sample: pytest's -rs summary counts them in one line
            why = (v.reason or "unchecked").partition(":")[0]
            pytest.skip(f"{why} (per-sample drill-down; the sample is in the test id)")


#: The last cell's per-sample verdicts (cases of one cell run one after another).
_SAMPLES: dict[tuple, dict[str, SampleVerdict]] = {}
