"""This checkout's own pytest setup: the benchc plugin, the Hypothesis profiles, and the opt-in
tests (architecture matrix, packaging, browser, gate power, multi-process runs) kept out of
the default run.

None of this belongs to the plugin: installed into another project, benchc changes nothing there
(no Hypothesis profile, no deselection) unless asked.
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from benchc.suite.options import given_explicitly
from benchc.testing.dev import warmup

pytest_plugins = ["benchc.plugin", "pytester"]  # pytester: tests of the plugin's own help text

#: Selects a Hypothesis profile (default ``ci``); ``--hypothesis-profile`` wins over it.
HYPOTHESIS_ENV = "BENCHC_HYPOTHESIS_PROFILE"
#: Markers whose tests run only when ``-m`` names them (each has its own line in ``.ci/run``),
#: declared (registered) here only; the suite's own markers are the plugin's.
OPT_IN_MARKERS = {
    "architectures": "the VLM architecture matrix (tiny random checkpoints); run with -m "
    "architectures",
    "packaging": "builds the wheel and runs the installed suite in a fresh venv; run with -m "
    "packaging",
    "browser": "drives headless Chromium; runs only under -m browser (own .ci/run line)",
    "gate_power": "benchmarks/gate_power.py on a miniature configuration; run with -m gate_power",
    "zoo": "benchmarks/checkpoint_zoo.py (real weight edits of the embedded model through the "
    "gates) on a miniature configuration; run with -m zoo",
    "slow": "multi-process runs (xdist, kills), the longest end-to-end runs and the default "
    "run's benchmark; run with -m slow (own .ci/run line)",
    "servers": "against servers benchc did not write (transformers serve); run with -m servers",
    "exporters": "W&B offline and MLflow file-store exports (extras wandb, mlflow); run with "
    "-m exporters (own .ci/run line)",
    "cluster": "the grid on a local Ray cluster (benchc[ray]: actors killed, driver killed, "
    "--from-store, server replicas); run with -m cluster",
    "power": "MDR power tests (simulated regressions over seeds, ~45 s); run with -m power",
    "verdicts": "every state of the verdict table under every policy, through real pytest "
    "processes (~10 min); run with -m verdicts",
    "sequential": "the sequential design by simulation (false alarms over 130 gates, power, "
    "forward passes; ~30 s); run with -m sequential",
}
#: The suite's warm-up process of this run: None (none), () (wanted), (process, log).
WARMUP = pytest.StashKey[tuple]()
#: Set when this run is the default run and its suite runs :data:`DEFAULT_RUN_SUITE`.
SUITE_SLICED = pytest.StashKey[bool]()


# ``ci``: modest, deterministic, no deadline (shared CI cores are slow and noisy); ``dev``: many
# more examples for local bug hunting. Registered at import, before ``--hypothesis-profile`` loads.
settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=500, deadline=None)


def _one_thread_per_worker() -> None:
    """In an xdist worker of this checkout's runs the workers are the parallelism: torch's
    thread pool in each of two workers on two cores would oversubscribe them (the suite's own
    session already limits itself so, :mod:`benchc.suite.session`), so each worker computes on
    one thread from its start, and the processes its tests start do too, unless
    ``OMP_NUM_THREADS`` is set."""
    if not os.environ.get("PYTEST_XDIST_WORKER") or "OMP_NUM_THREADS" in os.environ:
        return
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:  # read at import: a torch loaded already is told
        sys.modules["torch"].set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before the plugin builds the suite's session from the options
def pytest_configure(config: pytest.Config) -> None:
    _one_thread_per_worker()
    if is_default_run(config):
        for dest, value in DEFAULT_RUN_SUITE.items():
            setattr(config.option, dest, value)
        config.stash[SUITE_SLICED] = True
    for name, text in OPT_IN_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get(HYPOTHESIS_ENV, "ci"))


#: At most this many xdist workers for the default run: each imports torch and transformers
#: (~1.2 GB resident at the end), and past four the start-up of each eats the gain on this tree.
MAX_TEST_WORKERS = 4
#: Suite options that say only where a run keeps its files: the default run with them (a fresh
#: results store, as ``benchmarks/bench_default_run.py`` gives it) is still the default run.
WHERE_OPTIONS = {"--benchc-results-dir", "--benchc-cache-dir"}


#: The suite's part of the default run: one corruption of each family (the cheapest to compute)
#: at severities 1, 3 and 5, and the VSI gates on the first 300 samples of their set (``--limit``
#: leaves the 115-sample testbed whole), gated against the committed ``thresholds/tiny-vlm`` on
#: the cells and samples both hold. The whole grid (19 x 5, all 1000 VSI samples: every committed
#: number re-checked) is its own line in ``.ci/run``, ``pytest benchc_tests/suite``: on two cores
#: it costs about 200 s of CPU more than the three minutes the default run has.
DEFAULT_RUN_SUITE = {
    "benchc_corruptions": "gaussian_noise,defocus_blur,fog,contrast,pixelate",
    "benchc_severities": "1,3,5",
    "benchc_limit": "300",
}


def is_default_run(config: pytest.Config) -> bool:
    """Plain ``pytest`` over the test tree: paths from ``testpaths``, no ``-m``, no
    ``--snapshot-update`` (recording is of the whole grid) and no suite option other than where
    files go (:data:`WHERE_OPTIONS`). xdist's workers parse the same command line, so they agree
    with the controller."""
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.getoption("markexpr", "")
        and not config.getoption("update_snapshots", False)
        and not set(given_explicitly(config.getoption)) - WHERE_OPTIONS
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.stash.get(SUITE_SLICED, False):
        return (
            "benchc default run: the suite on "
            + ", ".join(f"{k.removeprefix('benchc_')}={v}" for k, v in DEFAULT_RUN_SUITE.items())
            + " (conftest.py); `pytest benchc_tests/suite` gates the whole grid"
        )
    return None


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto`` (``addopts``) spreads the default run -- plain ``pytest`` over the test tree
    -- over the machine's cores (at most :data:`MAX_TEST_WORKERS`; on 2 cores, 2026-12-04: cold
    x0.84, warm x0.68 of one process's wall time, docs/measurements.md). Any other run stays
    in one process, as typed: an opt-in marker's line (``-m``: kills, servers, clusters,
    browsers), named files or folders (one test, the suite on a GPU), a suite option
    (``--model=...``; where files go aside) or ``--snapshot-update`` (recording is one
    process's). ``-n N`` on the command line, or ``$PYTEST_XDIST_AUTO_NUM_WORKERS``, wins."""
    if not is_default_run(config):
        return 0
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # pytest-xdist's own reading of it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(MAX_TEST_WORKERS, cores or 1))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect opt-in tests (architecture matrix, packaging, browser) unless ``-m`` names
    their marker; in a run mixing the suite with other tests, the suite's cases go last (a
    warm-up process computes them meanwhile: :mod:`benchc.testing.dev.warmup`)."""
    expr = config.getoption("markexpr", "") or ""
    skip = [m for m in OPT_IN_MARKERS if m not in expr]
    keep = [i for i in items if not any(i.get_closest_marker(m) for m in skip)]
    if len(keep) < len(items):
        kept = {id(i) for i in keep}
        config.hook.pytest_deselected(items=[i for i in items if id(i) not in kept])
        items[:] = keep
    config.stash[WARMUP] = None
    if warmup.wanted(items, **warmup.facts(config)):
        items[:] = warmup.suite_last(items)
        config.stash[WARMUP] = ()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the suite's warm-up process once the plugin has loaded the model (its hook runs
    first)."""
    config = session.config
    if config.stash.get(WARMUP, None) is not None:
        plan = warmup.plan_of(config, session.items)
        config.stash[WARMUP] = warmup.start(plan) if plan is not None else None


@pytest.fixture(autouse=True)
def _whole_libraries_before_pytester(request: pytest.FixtureRequest) -> None:
    """pytester restores ``sys.modules`` after each in-process run: it drops the submodules the
    run imported but keeps their packages, which still hold them, so later code mixes two
    generations of classes. Seen twice: matplotlib ("Single argument to subplot must be a
    three-digit integer, not GridSpec") and numba, whose first JIT compile (glass blur) inside
    an inner run left llvmlite half re-imported ("assert isinstance(typ, types.Type)" in every
    later glass blur of the process; test_pytester_keeps_the_libraries_whole). Whichever xdist
    worker runs a pytester test first, this fixture makes the parts the suite uses whole
    before pytester takes its snapshot: matplotlib when this process holds part of it, and the
    corruption library with numba's runtime (one glass blur) when benchc's corruption engine,
    which keeps the library it loads, is imported."""
    if "pytester" not in request.fixturenames:
        return
    if "matplotlib" in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot
    if "benchc.corruptions.engine" in sys.modules and not _NUMBA_WHOLE:
        import numpy as np

        from benchc.corruptions.engine import corrupt_array

        corrupt_array(np.zeros((32, 32, 3), np.uint8), "glass_blur", 1, seed=0, sample_id="warm")
        _NUMBA_WHOLE.append(True)


#: Set once numba's runtime has compiled in this process (outside any pytester run).
_NUMBA_WHOLE: list[bool] = []


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(WARMUP, None)
    if started:
        session.config.stash[WARMUP] = None
        note = warmup.finish(*started)
        if note:
            print(f"\nWARNING: {note}", file=sys.stderr)
