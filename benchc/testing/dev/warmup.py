"""The default run's suite computed in a second process while the unit tests run.

This checkout's default ``pytest`` is about 850 unit tests plus the robustness suite on the
embedded model. Run in collection order, a fresh clone spent about 130 s of its first run on the
suite's model passes and corruption cache fill while the unit tests, single-threaded, left the
second core idle. When a run mixes the suite's cases with other tests, the root ``conftest.py``
moves the suite's cases to the end (:func:`suite_last`) and, once collection has loaded the model,
starts :func:`main` in a child process (:func:`start`): it fills the corruption cache (the run's
process pool, across the cores) and the results store for every condition and the VSI set, with
the same :class:`~benchc.suite.run.SuiteRun` code and store locks a second xdist worker uses. The
suite's cases then read what it stored and compute whatever it did not reach; the numbers are
those of a serial run (entries are keyed by model, data and settings, and computed in the same
chunks). A run of the suite alone, an xdist run and ``--snapshot-update`` are left as they were.

``BENCHC_WARMUP=0`` turns it off (``benchmarks/bench_default_run.py`` compares both).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

#: ``0`` turns the warm-up process off.
WARMUP_ENV = "BENCHC_WARMUP"


@dataclass(frozen=True)
class Plan:
    """What the child computes: the run's settings, its conditions in case order, and whether
    the VSI cases were selected."""

    cfg: object  # a SuiteConfig (pickled to the child as it is)
    conditions: tuple[str, ...]
    vsi: bool


def wanted(
    items: Sequence[pytest.Item], *, collect_only: bool, update: bool, parallel: bool
) -> bool:
    """Whether a run gets a warm-up process: the suite's cases mixed with other tests, in one
    process (``parallel``: xdist), not recording (``update``), not ``--collect-only``, and not
    turned off by ``BENCHC_WARMUP=0``."""
    from benchc.suite.collect import is_suite_item

    if os.environ.get(WARMUP_ENV, "1") == "0" or collect_only or update or parallel:
        return False
    suite = sum(1 for i in items if is_suite_item(i))
    return 0 < suite < len(items)


def facts(config: pytest.Config) -> dict[str, bool]:
    """:func:`wanted`'s keyword arguments for a pytest run's ``config``."""
    from benchc.suite import xdist

    return {
        "collect_only": bool(config.option.collectonly),
        "update": bool(config.getoption("update_snapshots", False)),
        "parallel": xdist.worker_id(config) is not None or xdist.worker_count(config) > 0,
    }


def suite_last(items: Sequence[pytest.Item]) -> list[pytest.Item]:
    """``items`` with the suite's cases moved to the end, each group in its own order."""
    from benchc.suite.collect import is_suite_item

    return [i for i in items if not is_suite_item(i)] + [i for i in items if is_suite_item(i)]


def plan_of(config: pytest.Config, items: Sequence[pytest.Item]) -> Plan | None:
    """The warm-up of this run once collection has loaded its model (None: nothing to do)."""
    from benchc.suite.collect import is_suite_item
    from benchc.suite.keys import LOAD_ERROR, SESSION

    if SESSION not in config.stash or LOAD_ERROR in config.stash:
        return None
    state = config.stash[SESSION]
    suite = [i for i in items if is_suite_item(i)]
    vsi = any("benchc_vsi_figure" in getattr(getattr(i, "callspec", None), "params", {})
              for i in suite)  # fmt: skip
    todo = [c for c in state.planned_conditions if not state.run.store.has(c)]
    vsi = vsi and not state.vsi_run.store.has(state.vsi_run.vsi_name)
    if not todo and not vsi:
        return None  # a warm run: everything is stored
    return Plan(state.cfg, tuple(state.planned_conditions), vsi)


def start(plan: Plan) -> tuple[subprocess.Popen, Path]:
    """Start :func:`main` on ``plan`` in a child process; returns it and its log file."""
    import benchc

    fd, name = tempfile.mkstemp(prefix="benchc-warmup-", suffix=".pickle")
    with os.fdopen(fd, "wb") as f:
        pickle.dump(plan, f)
    log = Path(name).with_suffix(".log")
    env = dict(os.environ)
    code_root = str(Path(benchc.__file__).resolve().parents[1])  # the child runs this code
    env["PYTHONPATH"] = os.pathsep.join(p for p in (code_root, env.get("PYTHONPATH")) if p)
    env.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", __name__, name], stdout=out, stderr=subprocess.STDOUT, env=env
        )
    return proc, log


def finish(proc: subprocess.Popen, log: Path, *, wait_s: float = 30.0) -> str | None:
    """Stop the child (it is done, or the suite's cases computed what it had left) and return
    a note when it failed; its log is kept then, removed otherwise."""
    try:
        code = proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        proc.terminate()
        code = proc.wait()
        log.unlink(missing_ok=True)
        return None
    if code == 0:
        log.unlink(missing_ok=True)
        return None
    return (
        f"the suite's warm-up process failed (exit {code}, log {log}); the suite's cases "
        "computed their results themselves"
    )


def run_plan(plan: Plan) -> None:
    """Compute ``plan`` into the run's corruption cache and results store: clean, every
    condition in case order (the corruption pool filling the cache ahead, as in a plain run),
    then the VSI arrays."""
    from benchc import spec
    from benchc.suite.session import SuiteSession
    from benchc.suite.vsi import VSIUnavailable, vsi_arrays

    state = SuiteSession(plan.cfg)  # type: ignore[arg-type]
    state.check_model_inputs()  # the dataset exactly as the suite's cases see it
    conditions = [c for c in plan.conditions if c != spec.CLEAN]
    if conditions:
        run = state.run
        run.start_prefetch(conditions)
        try:
            for key in [spec.CLEAN, *conditions]:
                run.condition(key)
        finally:
            run.stop_prefetch()
    if plan.vsi:
        try:
            vsi_arrays(state.vsi_run)
        except VSIUnavailable:
            pass  # the VSI cases skip with the reason themselves


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m benchc.testing.dev.warmup PLAN.pickle``: run the plan (the file is removed);
    the process ends with the one that started it."""
    from benchc.corruptions.batch import _proc_start, _watch_parent

    (path,) = list(sys.argv[1:] if argv is None else argv)
    parent = os.getppid()
    _watch_parent(parent, _proc_start(parent))
    with open(path, "rb") as f:
        plan = pickle.load(f)
    os.unlink(path)
    run_plan(plan)
    return 0


if __name__ == "__main__":
    sys.exit(main())
