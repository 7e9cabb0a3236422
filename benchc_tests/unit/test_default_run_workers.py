"""The checkout's default ``pytest`` spreads over the cores; every other run stays in one
process (root ``conftest.py``: ``pytest_xdist_auto_num_workers`` behind ``-n auto``)."""

from __future__ import annotations

import importlib.util
import os
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
