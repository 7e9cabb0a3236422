"""The checkout's default ``pytest`` spreads over the cores and runs the suite on a slice of the
grid; every other run stays in one process with the options it was given (root
``conftest.py``: ``pytest_xdist_auto_num_workers`` behind ``-n auto``, ``DEFAULT_RUN_SUITE``)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def root_conftest():
    spec = importlib.util.spec_from_file_location("benchc_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Invocation:
    """What the hook reads of a pytest run: where its paths came from and its options."""

    def __init__(self, source: pytest.Config.ArgsSource, **options) -> None:
        self.args_source = source
        self.options = options

    def getoption(self, name: str, default=None):
        return self.options.get(name, default)


TESTPATHS = pytest.Config.ArgsSource.TESTPATHS


@pytest.mark.parametrize("cores, workers", [(1, 1), (2, 2), (3, 3), (64, 4)])
def test_the_default_run_takes_the_cores_up_to_four(root_conftest, monkeypatch, cores, workers):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert root_conftest.pytest_xdist_auto_num_workers(Invocation(TESTPATHS)) == workers


@pytest.mark.parametrize(
    "source, options",
    [
        (pytest.Config.ArgsSource.ARGS, {}),  # named files or folders: one test, the suite
        (TESTPATHS, {"markexpr": "slow"}),  # an opt-in marker's .ci/run line
        (TESTPATHS, {"update_snapshots": True}),  # recording is one process's
        (TESTPATHS, {"benchc_model": "Qwen/Qwen2.5-VL-3B-Instruct"}),  # a suite option
        (TESTPATHS, {"benchc_dataset": "photos.tsv", "benchc_results_dir": "/tmp/r"}),
    ],
)
def test_every_other_run_stays_in_one_process(root_conftest, monkeypatch, source, options):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    assert root_conftest.pytest_xdist_auto_num_workers(Invocation(source, **options)) == 0


def test_a_fresh_results_store_or_cache_is_still_the_default_run(root_conftest, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_AUTO_NUM_WORKERS", raising=False)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    where = {"benchc_results_dir": "/tmp/r", "benchc_cache_dir": "/tmp/c"}
    assert root_conftest.pytest_xdist_auto_num_workers(Invocation(TESTPATHS, **where)) == 2


def test_xdists_own_variable_wins_on_the_default_run(root_conftest, monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_AUTO_NUM_WORKERS", "3")
    assert root_conftest.pytest_xdist_auto_num_workers(Invocation(TESTPATHS)) is None


def test_addopts_asks_for_it():
    import tomllib

    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "-n auto" in ini["addopts"]


def test_the_default_runs_slice_covers_every_family_and_gates_the_whole_testbed(root_conftest):
    from benchc import spec
    from benchc.data import load_dataset
    from benchc.suite.options import (
        DEFAULT_DATASET,
        DEFAULT_VSI_DATASET,
        parse_corruptions,
        parse_severities,
    )

    sliced = root_conftest.DEFAULT_RUN_SUITE
    chosen = parse_corruptions(sliced["benchc_corruptions"])
    assert all(set(chosen) & set(members) for members in spec.FAMILIES.values())
    severities = parse_severities(sliced["benchc_severities"])
    assert len(severities) >= 3 and min(severities) == 1 and max(severities) == 5  # trajectories
    limit = int(sliced["benchc_limit"])
    assert len(load_dataset(DEFAULT_DATASET)) <= limit < len(load_dataset(DEFAULT_VSI_DATASET))


def _collected() -> tuple[str, list[str]]:
    """The default run's ``pytest --co`` in a child process: its header and the suite's cells."""
    others = ["unit", "browser", "servers", "cluster"]  # --ignore keeps the paths from testpaths
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--co",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *(f"--ignore=benchc_tests/{name}" for name in others),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cells = [line.strip() for line in done.stdout.splitlines() if "<Function test_cell[" in line]
    return done.stdout, cells


def test_the_default_run_gates_the_slice_and_says_so():
    """Only the default run is sliced: every other run keeps its options
    (test_every_other_run_stays_in_one_process: the same ``is_default_run``)."""
    header, cells = _collected()
    assert "benchc default run: the suite on corruptions=gaussian_noise" in header
    assert len(cells) == 5 * 3
    assert "<Function test_cell[fog-3]>" in cells and "<Function test_cell[fog-2]>" not in cells
