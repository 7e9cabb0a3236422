"""The suite's client of the gate engine: one case's payload in, the case's outcome out.

The engine (:mod:`benchc.gates.engine`) decides the case: its snapshot in the baseline, the
paired check, the failure text with the commands to fix it. This module builds the engine
with the commands of this run's settings (:func:`engine_for`) and turns its decision into
pytest's (``pytest.fail``, ``pytest.skip``); ``--snapshot-update`` records through
:mod:`benchc.suite.record`. No gate is decided here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchc.gates import ErrorBudget, GridEvidence, Payload
from benchc.gates.baselines import BaselineRef
from benchc.gates.engine import Commands, GateEngine
from benchc.gates.snapshot import model_slug, recorded_vsi_support
from benchc.results.reader import StoredRun
from benchc.suite import changes
from benchc.suite.config import SuiteConfig
from benchc.suite.messages import command
from benchc.suite.options import suite_command


def record_command(cfg: SuiteConfig, *, extra: tuple[str, ...] = (), **overrides: Any) -> str:
    """The command that records this run's baseline (every comparability setting and the
    baseline's name: :func:`benchc.suite.messages.command`; ``overrides``: fields set
    otherwise)."""
    return command(cfg, update=True, extra=extra, **overrides)


def accept_command(cfg: SuiteConfig, ref: BaselineRef, case: str) -> str:
    """The command that records ``case`` from this checkpoint (its change is intended). A
    model-level or family case holds the baseline's whole grid, which a subset recording keeps
    as it was: its command records over that grid, so it runs as printed and takes."""
    from benchc import spec
    from benchc.gates.baselines import recorded

    over: dict[str, Any] = {}
    if case.startswith(("test_model[", "test_family[")):
        cells = recorded(ref.folder).conditions
        keys = [spec.parse_condition(c) for c in cells] if cells else []
        if keys:
            over["corruptions"] = tuple(c for c in spec.CORRUPTIONS if any(k[0] == c for k in keys))
            over["severities"] = tuple(sorted({k[1] for k in keys}))
    return record_command(cfg, extra=("-k", case), **over)


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
    return suite_command(settings, update=True)


#: Receives (case name, verdict record) for the summary, the report and JUnit properties.
Sink = Callable[[str, dict[str, Any]], None]


def engine_for(
    cfg: SuiteConfig, ref: BaselineRef, budget: ErrorBudget, config: pytest.Config | None = None
) -> GateEngine:
    """The run's gate engine: its baseline, budget and policy, with the commands it prints
    built from this run's settings."""
    from benchc.gates.baselines import read_manifest
    from benchc.suite.messages import record_release

    def release() -> str:
        model = cfg.model if ref.given is None else None
        return record_release(cfg, ref, model or read_manifest(ref.folder).get("model"))

    def drill_down(level: str, scope: str) -> str | None:
        samples = {"cell": f"test_sample and {scope}", "model": "test_sample",
                   "family": f"test_sample and family:{scope}"}  # fmt: skip
        if level not in samples:
            return None
        return command(cfg, extra=("--per-sample", "-k", samples[level]))

    commands = Commands(
        record_release=release,
        accept=lambda case: accept_command(cfg, ref, case),
        drill_down=drill_down,
        look_first=lambda: changes.look_first(config),
    )
    return GateEngine(ref, budget=budget, policy=cfg.policy, seed=cfg.seed, commands=commands)


class GateCheck:
    """Callable bound to one test's syrupy ``snapshot`` fixture: the engine decides, this
    turns the decision into the case's outcome (and, under ``--snapshot-update``, records)."""

    def __init__(
        self,
        snapshot: Any,
        cfg: SuiteConfig,
        node: pytest.Item,
        *,
        update: bool,
        engine: GateEngine,
        sink: Sink | None = None,
    ) -> None:
        self.snapshot, self.cfg, self.node, self.update = snapshot, cfg, node, update
        self.engine, self.sink = engine, sink

    @property
    def budget(self) -> ErrorBudget:
        return self.engine.budget

    @property
    def strict(self) -> bool:
        return self.engine.policy.strict

    @property
    def z_for(self):
        return self.engine.budget.z

    @property
    def ref(self) -> BaselineRef:
        return self.engine.baseline

    def __call__(self, payload: Payload) -> None:
        if self.update:
            self._record(payload)
            return
        decision = self.engine.decide_case(payload, self.node.name)
        for record in decision.records:
            if self.sink is not None:
                self.sink(self.node.name, record)
        if decision.action == "fail":
            pytest.fail(decision.message, pytrace=False)
        if decision.action == "skip":
            pytest.skip(decision.message)

    def unchecked(self, level: str, figure: str, reason: str) -> None:
        """Record a gate that could not even build its payload (it still gets a summary
        line: no gate goes unchecked silently)."""
        if self.sink is not None:
            self.sink(
                self.node.name,
                {"case": self.node.name, "scope": level, "level": level, "figure": figure,
                 "status": "unchecked", "reason": reason},
            )  # fmt: skip

    def _record(self, payload: Payload) -> None:
        """``--snapshot-update``: :mod:`benchc.suite.record` writes the case's snapshot."""
        from benchc.suite.record import record_case

        for record in record_case(self.engine, self.snapshot, self.node.name, payload):
            if self.sink is not None:
                self.sink(self.node.name, record)

    def check_sample(self, cell_key: str, sample_id: str, current: GridEvidence) -> None:
        """Drill-down: one sample of the cell ``current`` against the cell snapshot's evidence
        (:meth:`GateEngine.decide_sample`). No file of its own: ``--snapshot-update`` records
        samples through their cell."""
        decision = self.engine.decide_sample(cell_key, sample_id, current, self.node.name)
        for record in decision.records:  # the verdict counts a sample's gate like any other
            if self.sink is not None:
                self.sink(self.node.name, record)
        if decision.action == "fail":
            pytest.fail(decision.message, pytrace=False)
        if decision.action == "skip":
            pytest.skip(decision.message)
