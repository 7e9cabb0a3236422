"""The suite's session fixtures: its state, its config, and the model's runs on the dataset and
on the VSI set. Loaded by :mod:`benchc.plugin` (``pytest_plugins``); ``benchc_gate`` stays in
the plugin with the gates' other hooks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from benchc.suite import xdist
from benchc.suite.keys import RUN_DIRS

if TYPE_CHECKING:  # the suite's stack loads on first use, never in an unrelated run
    from benchc.suite.config import SuiteConfig
    from benchc.suite.run import SuiteRun
    from benchc.suite.session import SuiteSession


@pytest.fixture(scope="session")
def benchc_session(pytestconfig: pytest.Config) -> SuiteSession:
    """The process-wide suite state (config, dataset, backend, run)."""
    from benchc.suite.activate import activate

    return activate(pytestconfig)


@pytest.fixture(scope="session")
def benchc_config(benchc_session: SuiteSession) -> SuiteConfig:
    return benchc_session.cfg


@pytest.fixture(scope="session")
def benchc_run(benchc_session: SuiteSession, pytestconfig: pytest.Config) -> Iterator[SuiteRun]:
    """The model under test on the dataset, backed by the results store (one per process)."""
    run = benchc_session.run
    pytestconfig.stash[RUN_DIRS].add(str(run.store.run_dir))
    worker = xdist.worker_id(pytestconfig)
    if worker is None:  # xdist workers are the parallelism already
        run.start_prefetch(benchc_session.planned_conditions)
    from benchc.suite.progress import for_session

    # an xdist worker does not know its share of the cells: queries and rate, no ETA
    total = (
        None
        if worker
        else run.pending_queries(
            benchc_session.planned_conditions, benchc_session.planned_rotations
        )
    )
    run.attach_progress(for_session(pytestconfig, benchc_session.cfg.progress, total, worker))
    yield run
    run.stop_prefetch()


@pytest.fixture(scope="session")
def benchc_vsi_run(benchc_session: SuiteSession, pytestconfig: pytest.Config) -> SuiteRun:
    """The model on the VSI gates' dataset (the embedded VSI set by default)."""
    run = benchc_session.vsi_run
    pytestconfig.stash[RUN_DIRS].add(str(run.store.run_dir))
    return run
