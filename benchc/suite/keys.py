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
#: The run's one verdict (:class:`benchc.report.overall.Overall`), decided once at session end.
OVERALL = pytest.StashKey["Overall"]()
#: pytest's ``record_testsuite_property`` (a gate case asked for it): the JUnit suite properties.
SUITE_PROPERTY = pytest.StashKey[object]()
#: One line per write that failed after the results were computed (report, exports, manifest).
WRITE_ERRORS = pytest.StashKey[list]()
#: (exit code, one-line message) of the fault that ended the run once (:mod:`benchc.suite.route`).
STOPPED = pytest.StashKey[list]()
