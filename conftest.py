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
    "slow": "multi-process runs (xdist, kills), the longest end-to-end runs and the default "
    "run's benchmark; run with -m slow (own .ci/run line)",
    "servers": "against servers benchc did not write (transformers serve); run with -m servers",
    "exporters": "W&B offline and MLflow file-store exports (extras wandb, mlflow); run with "
    "-m exporters (own .ci/run line)",
    "cluster": "the grid on a local Ray cluster (benchc[ray]: actors killed, driver killed, "
    "--from-store, server replicas); run with -m cluster",
    "power": "MDR power tests (simulated regressions over seeds, ~45 s); run with -m power",
}
#: The suite's warm-up process of this run: None (none), () (wanted), (process, log).
WARMUP = pytest.StashKey[tuple]()


# ``ci``: modest, deterministic, no deadline (shared CI cores are slow and noisy); ``dev``: many
# more examples for local bug hunting. Registered at import, before ``--hypothesis-profile`` loads.
settings.register_profile("ci", max_examples=50, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=500, deadline=None)


def pytest_configure(config: pytest.Config) -> None:
    for name, text in OPT_IN_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if not config.getoption("hypothesis_profile", None):
        settings.load_profile(os.environ.get(HYPOTHESIS_ENV, "ci"))


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
def _whole_matplotlib_before_pytester(request: pytest.FixtureRequest) -> None:
    """pytester restores ``sys.modules`` after each in-process run: it drops the matplotlib
    submodules the run imported (``gridspec``, ``figure``) but keeps the package, which still
    holds them as attributes, so the next run's figures mix two generations of classes ("Single
    argument to subplot must be a three-digit integer, not GridSpec"). Whenever this process
    holds part of matplotlib (a test module's ``from matplotlib.colors import ...``), it imports
    the parts the report draws with before pytester takes its snapshot."""
    if "pytester" in request.fixturenames and "matplotlib" in sys.modules:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(WARMUP, None)
    if started:
        session.config.stash[WARMUP] = None
        note = warmup.finish(*started)
        if note:
            print(f"\nWARNING: {note}", file=sys.stderr)
