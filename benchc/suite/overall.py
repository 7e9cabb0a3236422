"""The run's one verdict at session end, as a pytest plugin: the gate engine's client.

The engine (:mod:`benchc.gates.engine`) decides from the gate records, the facts of the stored
runs, the gated cases that raised, and how the session ended (finished, interrupted, stopped by
a fault outside the model). Decided once, before any output is written (``tryfirst``: before
JUnit XML is written and before the plugin's own report hooks), and stashed: the terminal
summary, the page, the step summary, the exporters and the JUnit ``<testsuite>`` properties all
read this one object, and the exit status is its code in the verdict table
(:mod:`benchc.gates.states`), unless a test outside the suite failed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchc.suite.keys import (
    BASELINE,
    BUDGET,
    ERRORED,
    INFRA,
    OTHER_FAILED,
    OVERALL,
    PROBLEMS,
    PROGRESS,
    RUN_DIRS,
    SESSION,
    STOPPED,
    SUITE_PROPERTY,
    USER_STOP,
    VERDICTS,
)

if TYPE_CHECKING:  # the report's stack loads at session end, not with the plugin
    from benchc.gates.facts import Facts
    from benchc.gates.verdict import Overall
    from benchc.suite.session import SuiteSession

#: The suite's gated test functions (a case id names one of them).
GATED = ("test_cell[", "test_family[", "test_model[", "test_vsi[", "test_sample[")


def is_gated_id(nodeid: str) -> bool:
    name = nodeid.rpartition("::")[2]
    return name.startswith(GATED)


def baseline_folder(config: pytest.Config) -> Path | None:
    """The baseline this session gated against: its own, or (the xdist controller, which runs
    no case) the one its workers resolved; None when no case ran."""
    state = config.stash[SESSION]
    if state.started:
        return state.baseline.folder
    folder = config.stash.get(BASELINE, None)
    return Path(folder) if folder else None


def _facts(config: pytest.Config, run_dirs) -> Facts | None:
    """The facts of the stored run against the baseline (None when it cannot be read back)."""
    from benchc.report.write import run_facts_for
    from benchc.results.reader import group_runs
    from benchc.results.store import StoreError

    groups = group_runs([Path(d) for d in sorted(run_dirs)])
    if len(groups) != 1:
        return None
    try:
        return run_facts_for(groups[0][0], baseline_folder(config), groups[0][1])
    except (StoreError, OSError, ValueError):
        return None


def _ending(session: pytest.Session) -> tuple[str | None, bool]:
    """Why the session did not run every selected case (None: it did), and whether the user
    stopped it (Ctrl-C) rather than pytest (``-x``, ``--maxfail``)."""
    config = session.config
    finished, selected = config.stash.get(PROGRESS, (0, 0))
    if config.stash.get(USER_STOP, False):
        return f"interrupted by the user after {finished} of {selected} gated case(s)", True
    if config.stash.get(INFRA, None) is not None or config.stash.get(STOPPED, None):
        return None, False  # a fault ended it: the verdict's infra (or usage) state says so
    stop = session.shouldfail or session.shouldstop
    if stop and selected:  # (a session of no gated case, e.g. the unit tests' own -x: not ours)
        return f"stopped early ({stop}) after {finished} of {selected} gated case(s)", False
    if selected and finished < selected:
        return f"{selected - finished} of {selected} gated case(s) did not run", False
    return None, False


def session_overall(session: pytest.Session) -> Overall | None:
    """The run's verdict from the engine; None when the run gated nothing, raised nothing and
    finished (a recording that recorded every case)."""
    from benchc.gates.engine import recording_verdict, run_verdict
    from benchc.gates.states import EXIT_INFRA
    from benchc.gates.verdict import Ending, Progress
    from benchc.suite.messages import command

    config = session.config
    if config.option.collectonly:  # nothing was meant to run: no verdict
        return None
    state: SuiteSession = config.stash[SESSION]
    records = [v for v in config.stash.get(VERDICTS, []) if v.get("status") != "recorded"]
    errored = config.stash.get(ERRORED, [])
    problems = config.stash.get(PROBLEMS, [])
    infra, (ending, by_user) = config.stash.get(INFRA, None), _ending(session)
    stopped = config.stash.get(STOPPED, None)  # a fault that ended the run once
    if stopped and stopped[0] == EXIT_INFRA:
        infra = infra or stopped[1]
    elif stopped:  # the route refused before the first query: the usage state
        problems = [*problems, {"case": "the run", "error": stopped[1].splitlines()[0]}]
    recording = bool(config.getoption("update_snapshots", False))
    if not records and not errored and not problems and infra is None and ending is None:
        return None
    finished, selected = config.stash.get(PROGRESS, (0, 0))
    progress = Progress(finished, selected, command(state.cfg, update=recording))
    end = Ending(errored, problems, ending, by_user, infra, progress)
    if recording:
        every = config.stash.get(VERDICTS, [])
        return recording_verdict(every, policy=state.cfg.policy, ending=end)
    facts = _facts(config, config.stash[RUN_DIRS]) if ending is None and infra is None else None
    return run_verdict(records, policy=state.cfg.policy, facts=facts, ending=end,
                       budget=config.stash.get(BUDGET, None))  # fmt: skip


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember a gated case that raised (not a gate's own failure, nor a skip): its gates
    were never checked, so the verdict cannot be PASS and a recording recorded nothing for it.
    A fault outside the model (:class:`benchc.errors.InfrastructureError`) ends the run once."""
    outcome = yield
    report = outcome.get_result()
    config = item.config
    if _ends_the_run(item, call, report):
        return
    if (
        not report.failed
        or call.excinfo is None
        or ERRORED not in config.stash
        or "benchc_gate" not in getattr(item, "fixturenames", ())
        or call.excinfo.errisinstance(pytest.skip.Exception)
    ):
        return
    if call.excinfo.errisinstance(pytest.fail.Exception):
        _case_problem(item, str(call.excinfo.value))
        return
    first = str(call.excinfo.value).strip().splitlines()
    error = f"{call.excinfo.typename}: {first[0] if first else ''}".rstrip(": ")
    config.stash[ERRORED].append({"case": item.name, "when": call.when, "error": error})


#: Gate statuses that explain a failed case (the engine failed it on a gate).
_GATED = ("fail", "unresolved", "unchecked")


def _case_problem(item: pytest.Item, message: str) -> None:
    """A case the engine failed without a gate of its own failing (its snapshot missing,
    unusable or recorded under other settings; a rule that cannot be read): the baseline cannot
    check it, the usage state, never a PASS."""
    config = item.config
    if any(r.get("case") == item.name and r.get("status") in _GATED
           for r in config.stash.get(VERDICTS, [])):  # fmt: skip
        return
    first = message.strip().splitlines()
    config.stash[PROBLEMS].append({"case": item.name, "error": first[0] if first else ""})


class ProgressCounter:
    """Counts the gated cases selected and finished, and the failed tests outside the suite
    (the controller sees every worker's reports): what an unfinished run's verdict says."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        config.stash[PROGRESS] = (0, 0)
        config.stash[OTHER_FAILED] = 0

    def _selected(self, n: int) -> None:
        finished, selected = self.config.stash[PROGRESS]
        self.config.stash[PROGRESS] = (finished, max(selected, n))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self._selected(sum(1 for i in session.items if is_gated_id(i.nodeid)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self._selected(sum(1 for i in ids if is_gated_id(i)))

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo) -> None:
        """``pytest.exit`` with the infrastructure code (a device that refused a write) is a
        fault outside the model, not the user's Ctrl-C."""
        from benchc.gates.states import EXIT_INFRA

        if getattr(excinfo.value, "returncode", None) == EXIT_INFRA:
            self.config.stash[INFRA] = str(getattr(excinfo.value, "msg", excinfo.value))
        elif type(excinfo.value) is KeyboardInterrupt:  # not pytest's or xdist's Interrupted
            self.config.stash[USER_STOP] = True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        stash = self.config.stash
        if not is_gated_id(report.nodeid):
            if report.failed:
                stash[OTHER_FAILED] += 1
            return
        if report.when == "call" or (report.when == "setup" and not report.passed):
            finished, selected = stash[PROGRESS]
            stash[PROGRESS] = (finished + 1, selected)


def count_progress(config: pytest.Config) -> None:
    """Start counting this session's gated cases (once per config)."""
    if not config.pluginmanager.has_plugin("benchc-progress"):
        config.pluginmanager.register(ProgressCounter(config), "benchc-progress")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if SESSION not in config.stash or getattr(config, "workeroutput", None) is not None:
        return  # not a benchc session, or an xdist worker (the controller decides)
    overall = session_overall(session)
    if overall is None:
        return
    config.stash[OVERALL] = overall
    record = config.stash.get(SUITE_PROPERTY, None)
    if record is not None:
        from benchc.report.ci import suite_properties

        for name, value in suite_properties(overall):
            record(name, value)  # type: ignore[operator]
    if config.stash.get(OTHER_FAILED, 0):
        return  # pytest's own status: a test outside the suite failed
    session.exitstatus = overall.exit_code


# -- a fault that ends the run once: its stop, one line, and the verdict's infra or usage state
def _ends_the_run(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> bool:
    """An infrastructure fault or a route mismatch (:func:`benchc.suite.route.stopping_error`):
    the run stops here (no other case re-sends the request), the case's report is the one
    line, not a traceback, and the exit code is the verdict table's."""
    if not (report.failed and call.excinfo and SESSION in item.config.stash):
        return False  # loads nothing of the suite in a run that is not benchc's
    from benchc.suite.collect import is_suite_item
    from benchc.suite.route import stopping_error

    stop = stopping_error(call.excinfo.value) if is_suite_item(item) else None
    if stop is None:
        return False
    report.longrepr = stop[1]
    item.session.shouldstop = stop[1].splitlines()[0][:200]
    item.config.stash.setdefault(STOPPED, list(stop))
    workeroutput = getattr(item.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["benchc_stopped"] = list(stop)
    # a recording still says which cases recorded nothing (its baseline is incomplete)
    return not item.config.getoption("update_snapshots", False)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist: a worker's fault that ended the run reaches the controller's exit code."""
    stop = getattr(node, "workeroutput", {}).get("benchc_stopped")
    if stop:
        node.config.stash.setdefault(STOPPED, stop)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    """The one error, once, with the command that resumes the run (its stored rows are kept)."""
    stop = config.stash.get(STOPPED, None)
    if not stop or SESSION not in config.stash:
        return
    from benchc.suite.messages import command

    update = bool(config.getoption("update_snapshots", False))
    terminalreporter.write_line(f"benchc: {stop[1]} (exit {stop[0]})", red=True, bold=True)
    terminalreporter.write_line(
        f"  resume (stored rows are kept): {command(config.stash[SESSION].cfg, update=update)}"
    )
