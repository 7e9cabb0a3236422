"""The run's one verdict at session end (:mod:`benchc.report.overall`), as a pytest plugin.

Decided once, before any output is written (``tryfirst``: before JUnit XML is written and
before the plugin's own report hooks), and stashed: the terminal summary, the page, the step
summary and the JUnit ``<testsuite>`` properties all read this one object. Under
``--inconclusive=fail`` (the default under ``--strict-gates``) an unresolved or inconclusive
run exits with :data:`benchc.report.overall.EXIT_INCONCLUSIVE` (a failed run keeps its own exit
status).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchc.suite.keys import (
    ERRORED,
    OVERALL,
    RUN_DIRS,
    SESSION,
    STOPPED,
    SUITE_PROPERTY,
    VERDICTS,
)

if TYPE_CHECKING:  # the report's stack loads at session end, not with the plugin
    from benchc.report.overall import Overall


def session_overall(
    run_dirs: Iterable[str],
    verdicts: list[dict] | None,
    baseline_folder: Path | None,
    errored: Sequence[Mapping[str, str]] = (),
) -> Overall | None:
    """The verdict from the gate records and the stored run against the baseline, failed by
    every gated case that raised before its gates were checked (``errored``); None when no gate
    was checked and none raised (a recording). A run that cannot be read back is decided on its
    records alone."""
    from benchc.report.overall import decide, with_errors
    from benchc.report.write import assess
    from benchc.results.reader import group_runs
    from benchc.results.store import StoreError

    records = [v for v in verdicts or [] if v.get("status") != "recorded"]
    if not records:
        return with_errors(decide(records), errored) if errored else None
    groups = group_runs([Path(d) for d in sorted(run_dirs)])
    if len(groups) != 1:
        return with_errors(decide(records), errored)
    try:
        overall = assess(groups[0][0], baseline_folder, records, groups[0][1])
    except (StoreError, OSError, ValueError):
        overall = decide(records)
    return with_errors(overall, errored)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Remember a gated case that raised (not a gate's own failure, nor a skip): its gates
    were never checked, so the verdict cannot be PASS and a recording recorded nothing for it."""
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
        or call.excinfo.errisinstance((pytest.fail.Exception, pytest.skip.Exception))
    ):
        return
    first = str(call.excinfo.value).strip().splitlines()
    error = f"{call.excinfo.typename}: {first[0] if first else ''}".rstrip(": ")
    config.stash[ERRORED].append({"case": item.name, "when": call.when, "error": error})


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if SESSION not in config.stash or getattr(config, "workeroutput", None) is not None:
        return  # not a benchc session, or an xdist worker (the controller decides)
    state = config.stash[SESSION]
    if config.stash.get(STOPPED, None):  # a fault outside the model: its own exit code
        session.exitstatus = config.stash[STOPPED][0]
        return
    if config.getoption("update_snapshots", False) or not state.started:
        return
    overall = session_overall(
        config.stash[RUN_DIRS],
        config.stash.get(VERDICTS, []),
        state.baseline.folder,
        config.stash.get(ERRORED, []),
    )
    if overall is None:
        return
    config.stash[OVERALL] = overall
    record = config.stash.get(SUITE_PROPERTY, None)
    if record is not None:
        from benchc.report.ci import suite_properties

        for name, value in suite_properties(overall):
            record(name, value)  # type: ignore[operator]
    from benchc.report.overall import EXIT_INCONCLUSIVE

    if (
        overall.state in ("unresolved", "inconclusive")
        and state.cfg.inconclusive_mode == "fail"
        and session.exitstatus == pytest.ExitCode.OK
    ):
        session.exitstatus = EXIT_INCONCLUSIVE


# -- a fault that ends the run once (issue 49; the gate engine's rewrite absorbs these) -------
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
