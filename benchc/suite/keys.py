"""The pytest stash keys the plugin's hooks and fixtures share: one process's suite state.

A module of their own so that :mod:`benchc.suite.fixtures` and :mod:`benchc.plugin` read the
same keys without importing each other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # never imported for the keys: an unrelated run loads none of the suite
    pass

SESSION = pytest.StashKey["SuiteSession"]()
RUN_DIRS = pytest.StashKey[set]()
NOTES = pytest.StashKey[list]()
LOAD_ERROR = pytest.StashKey[str]()

#: Every gate's verdict record (:meth:`benchc.gates.Outcome.to_dict`), for summary and report.
VERDICTS = pytest.StashKey[list]()
#: Every gated case that raised an error before its gates were checked: ``{"case", "error"}``.
ERRORED = pytest.StashKey[list]()
#: The run's false-alarm budget split over the gates that were collected.
BUDGET = pytest.StashKey["ErrorBudget"]()
#: The run's one verdict (:class:`benchc.gates.verdict.Overall`), decided once at session end.
OVERALL = pytest.StashKey["Overall"]()
#: pytest's ``record_testsuite_property`` (a gate case asked for it): the JUnit suite properties.
SUITE_PROPERTY = pytest.StashKey[object]()
#: One line per write that failed after the results were computed (report, exports, manifest).
WRITE_ERRORS = pytest.StashKey[list]()
#: A fault outside the model that ended the run (:class:`benchc.errors.InfrastructureError`).
INFRA = pytest.StashKey[str]()
#: (gated cases finished, gated cases selected): what an unfinished run says.
PROGRESS = pytest.StashKey[tuple]()
#: Failed tests outside the suite (they keep pytest's own exit status).
OTHER_FAILED = pytest.StashKey[int]()
#: This process's gate engine (:class:`benchc.gates.engine.GateEngine`).
ENGINE = pytest.StashKey[object]()
#: The baseline folder the workers gated against (the xdist controller runs no case).
BASELINE = pytest.StashKey[str]()
#: Gated cases the baseline could not check (``{"case", "error"}``): the usage state.
PROBLEMS = pytest.StashKey[list]()
#: The run's "changed since baseline" (:func:`benchc.gates.changes.baseline_changes`).
CHANGES = pytest.StashKey[dict]()
#: (exit code, one-line message) of the fault that ended the run once (:mod:`benchc.suite.route`).
STOPPED = pytest.StashKey[list]()
#: Set when the user interrupted the run (Ctrl-C), not a fault or pytest's ``-x``.
USER_STOP = pytest.StashKey[bool]()
