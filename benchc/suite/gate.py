"""Checking one case's payload against its threshold snapshot, with actionable failures.

syrupy does the reading, writing and ``--snapshot-update``; this adds what a release engineer
needs around it: a missing snapshot says how to record one, a snapshot recorded under other
settings says so instead of reporting nonsense deltas, and a failing gate prints the figure,
cell, baseline, current, tolerance and the samples that moved most.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from benchc import spec
from benchc.gates import Payload, compare, describe, report
from benchc.suite.config import DEFAULT_DATASET, DEFAULT_MODEL, SuiteConfig

#: Info keys that must agree for a comparison to mean anything (else: fail, re-record).
SETTINGS_KEYS: tuple[str, ...] = ("dataset_fingerprint", "image_size", "seed")
#: Info key that must agree for model-level figures (else: the case is not applicable).
GRID_KEY = "conditions"


def record_command(cfg: SuiteConfig) -> str:
    """The one command that records this model's thresholds."""
    parts = ["pytest", "benchc_tests/suite"]
    if cfg.model != DEFAULT_MODEL:
        parts.append(f"--model={cfg.model}")
    if cfg.dataset != DEFAULT_DATASET:
        parts.append(f"--dataset={cfg.dataset}")
    if cfg.corruptions != spec.CORRUPTIONS:
        parts.append(f"--corruptions={','.join(cfg.corruptions)}")
    if cfg.severities != spec.SEVERITIES:
        parts.append(f"--severities={','.join(map(str, cfg.severities))}")
    if cfg.image_size is not None:
        parts.append(f"--image-size={cfg.image_size}")
    if cfg.seed != spec.DEFAULT_SEED:
        parts.append(f"--seed={cfg.seed}")
    if cfg.thresholds_dir.resolve() != (Path.cwd() / "thresholds").resolve():
        parts.append(f"--thresholds-dir={cfg.thresholds_dir}")
    parts.append("--snapshot-update")
    return shlex.join(parts)


class GateCheck:
    """Callable bound to one test's syrupy ``snapshot`` fixture."""

    def __init__(self, snapshot: Any, cfg: SuiteConfig, node: pytest.Item, *, update: bool):
        self.snapshot, self.cfg, self.node, self.update = snapshot, cfg, node, update

    @property
    def path(self) -> Path:
        return Path(
            self.snapshot.extension.get_location(test_location=self.snapshot.test_location, index=0)
        )

    def baseline(self) -> Payload | None:
        path = self.path
        if not path.is_file():
            return None
        try:
            return Payload.from_json(path.read_text(encoding="utf-8"), where=str(path))
        except (ValueError, KeyError) as exc:
            pytest.fail(f"threshold snapshot {path} is unreadable: {exc}", pytrace=False)

    def __call__(self, payload: Payload) -> None:
        baseline = self.baseline()
        if baseline is None and not self.update:
            pytest.fail(
                f"no threshold snapshot for model {payload.model!r} case {payload.scope} "
                f"(expected {self.path}).\nRecord the current figures as the baseline with:\n"
                f"    {record_command(self.cfg)}",
                pytrace=False,
            )
        if baseline is not None and not self.update:
            self._check_comparable(baseline, payload)
        if baseline is not None:
            payload = payload.with_rules(baseline.rules)  # hand-edited rules survive updates
        if self.snapshot == payload:
            if baseline is not None and not self.update:
                for o in compare(baseline, payload):
                    if o.status == "improved":
                        self.node.user_properties.append(
                            ("benchc_improved", f"{o.rule.figure} in {payload.scope}: "
                             f"{o.baseline.value:.4f} -> {o.current.value:.4f}")
                        )  # fmt: skip
            return
        assert baseline is not None  # syrupy only fails when a baseline exists
        lines = report(baseline, payload)
        lines.append(f"snapshot: {self.path}")
        lines.append(
            "if this change is intended, record it: "
            f"{record_command(self.cfg)} -k '{self.node.name}'"
        )
        pytest.fail("\n".join(lines), pytrace=False)

    def _check_comparable(self, baseline: Payload, payload: Payload) -> None:
        for key in SETTINGS_KEYS:
            old, new = baseline.info.get(key), payload.info.get(key)
            if old != new:
                pytest.fail(
                    f"threshold snapshot {self.path} was recorded with {key}={old!r}, this run "
                    f"has {key}={new!r}; the figures are not comparable. Re-record with:\n"
                    f"    {record_command(self.cfg)}",
                    pytrace=False,
                )
        old, new = baseline.info.get(GRID_KEY), payload.info.get(GRID_KEY)
        if old != new:
            pytest.skip(
                f"model-level thresholds were recorded over {len(old or ())} cells, this run "
                f"selects {len(new or ())}; model-level gates apply to the recorded grid only"
            )

    def check_sample(self, current: Payload, cell_key: str) -> None:
        """Drill-down: one sample against its cell snapshot's per-sample values (no file of
        its own; ``--snapshot-update`` records samples through their cell)."""
        from benchc.gates.snapshot import cell_file
        from benchc.suite.cases import sample_baseline

        path = self.path.parent / cell_file(cell_key)
        if not path.is_file():
            pytest.fail(
                f"no threshold snapshot {path} for cell {cell_key}; record one with:\n"
                f"    {record_command(self.cfg)}",
                pytrace=False,
            )
        cell = Payload.from_json(path.read_text(encoding="utf-8"), where=str(path))
        self._check_comparable(cell, current)
        baseline = sample_baseline(cell, current)
        if baseline is None:
            pytest.fail(f"sample {current.ids[0]!r} is not in {path}", pytrace=False)
        failed = [o for o in compare(baseline, current) if o.status == "fail"]
        if failed:
            lines = [line for o in failed for line in describe(o, baseline, current)]
            pytest.fail("\n".join(lines), pytrace=False)
