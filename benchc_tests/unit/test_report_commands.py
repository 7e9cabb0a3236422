"""Printed commands (issue 32 item 3): re-recording a baseline from the released checkpoint
names the release and never the candidate's ``--results-dir``; accepting the candidate's
change records the candidate under the baseline's name. Each is run verbatim by the slow
``test_release_recipe.py::test_a_regressed_candidate_fails_the_gate_and_the_report``."""

from __future__ import annotations

import shlex
from pathlib import Path

from benchc.gates.baselines import BaselineRef, write_manifest
from benchc.results.reader import read_run
from benchc.suite.config import SuiteConfig
from benchc.suite.messages import record_release
from benchc.suite.reports import record_command_for
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline


def _flags(command: str) -> dict[str, str]:
    return dict(a.partition("=")[::2] for a in shlex.split(command) if a.startswith("--"))


def test_the_release_command_runs_in_the_releases_own_results_folder(tmp_path):
    for name in ("cand", "data"):
        (tmp_path / name).mkdir()
    cfg = SuiteConfig.from_options(
        {"benchc_model": str(tmp_path / "cand"), "benchc_dataset": str(tmp_path / "data"),
         "benchc_results_dir": str(tmp_path / "cand-results"),
         "benchc_baseline": "release-1"}.get,
        rootdir=tmp_path,
    )  # fmt: skip
    ref = BaselineRef("release-1", tmp_path / "thresholds" / "release-1", "release-1")
    flags = _flags(record_release(cfg, ref, "org/released"))
    assert flags["--model"] == "org/released" and flags["--baseline"] == "release-1"
    assert "--results-dir" not in flags and "--snapshot-update" in flags
    # the candidate recording itself keeps its own results folder (its run is reused)
    own = _flags(record_release(cfg, BaselineRef("cand", tmp_path / "t" / "cand"), cfg.model))
    assert own["--results-dir"] == str(tmp_path / "cand-results")


def test_benchc_report_offers_the_release_and_the_candidate_commands(tmp_path):
    ds = make_dataset(tmp_path / "ds", n=12)
    base = make_run(tmp_path / "base-results", ds, model="released")
    folder = record_baseline(base, tmp_path / "thresholds", model="release-1")
    write_manifest(folder, {"name": "release-1", "model": "org/released"})
    cand = read_run(make_run(tmp_path / "cand-results", ds, model="cand", damp=1.0))
    release = _flags(record_command_for(cand, tmp_path / "thresholds", folder))
    assert release["--model"] == "org/released" and "--results-dir" not in release
    accept = _flags(record_command_for(cand, tmp_path / "thresholds", folder, release=False))
    assert accept["--model"] == "cand" and accept["--baseline"] == "release-1"
    assert Path(accept["--results-dir"]) == tmp_path / "cand-results"
