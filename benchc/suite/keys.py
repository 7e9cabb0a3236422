"""The pytest stash keys the plugin's hooks and fixtures share: one process's suite state.

A module of their own so that :mod:`benchc.suite.fixtures` and :mod:`benchc.plugin` read the
same keys without importing each other.
"""

from __future__ import annotations

import pytest

from benchc.suite.session import SuiteSession

SESSION = pytest.StashKey[SuiteSession]()
RUN_DIRS = pytest.StashKey[set]()
NOTES = pytest.StashKey[list]()
LOAD_ERROR = pytest.StashKey[str]()

#: Every gate's verdict record (:meth:`benchc.gates.Outcome.to_dict`), for summary and report.
VERDICTS = pytest.StashKey[list]()
#: The run's false-alarm budget split over the gates that were collected.
BUDGET = pytest.StashKey["ErrorBudget"]()
#: The run's one verdict (:class:`benchc.report.overall.Overall`), decided once at session end.
OVERALL = pytest.StashKey["Overall"]()
#: pytest's ``record_testsuite_property`` (a gate case asked for it): the JUnit suite properties.
SUITE_PROPERTY = pytest.StashKey[object]()
