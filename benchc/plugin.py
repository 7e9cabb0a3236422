"""The benchc pytest plugin: hooks of a few lines each over ``benchc.suite``.

Registered both by the root ``conftest.py`` and as the ``pytest11`` entry point ``benchc.plugin``;
the shared name keeps pytest from loading it twice. The suite's cases live in
``benchc_tests/suite``; the options are declared in ``benchc.suite.options``, collection is
``benchc.suite.collect``, the session fixtures ``benchc.suite.fixtures``, and what a finished run
writes ``benchc.suite.reports``. The gates' own hooks (``benchc_gate``, gate counting, the
summary) stay here.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchc.suite.activate import activate, suite_requested, usage_error
from benchc.suite.keys import (
    BASELINE,
    BUDGET,
    CHANGES,
    ENGINE,
    ERRORED,
    LOAD_ERROR,
    NOTES,
    OVERALL,
    PROBLEMS,
    RUN_DIRS,
    SESSION,
    SUITE_PROPERTY,
    VERDICTS,
    WRITE_ERRORS,
)
from benchc.suite.options import add_namespaced_options
from benchc.suite.shortforms import GROUP, GROUP_HELP, add_short_forms

if TYPE_CHECKING:
    from benchc.suite.gate import GateCheck
    from benchc.suite.session import SuiteSession

pytest_plugins = ["benchc.suite.fixtures", "benchc.suite.overall"]

#: Which gate level each case marker checks (for the false-alarm budget).
_LEVEL_OF_MARKER = {"benchc_cell": "cell", "benchc_family": "family", "benchc_model": "model"}


def pytest_addoption(parser: pytest.Parser) -> None:
    add_namespaced_options(parser.getgroup(GROUP, GROUP_HELP).addoption)


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(
    early_config: pytest.Config, parser: pytest.Parser, args: list[str]
) -> Iterator[None]:
    """The short forms (``--model``), once the repository's own conftests declared theirs
    (:mod:`benchc.suite.shortforms`)."""
    result = yield
    add_short_forms(parser)
    return result


def pytest_configure(config: pytest.Config) -> None:
    """Markers only, unless this run asks for the suite: an unrelated test run of a repository
    that has benchc installed imports nothing more and builds nothing."""
    from benchc.suite.markers import register_markers

    register_markers(config)
    if suite_requested(config):
        activate(config)


def _session(config: pytest.Config) -> SuiteSession:
    return activate(config)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if any(name.startswith("benchc_") for name in metafunc.fixturenames):
        from benchc.suite import collect

        collect.parametrize(metafunc, _session(metafunc.config))


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: object):
    """Without ``--per-sample`` its test has no case: its placeholder is never collected, so
    pytest's "collected N items" counts only cases that run or that a user deselects."""
    result = yield
    if isinstance(result, list) and SESSION in collector.config.stash:
        from benchc.suite.markers import PER_SAMPLE_OFF

        result = [i for i in result if PER_SAMPLE_OFF not in getattr(i, "name", "")]
    return result


def _gate_counts(items: list[pytest.Item]) -> dict[str, int]:
    """How many gates of each level the selected cases run (the budget's denominators)."""
    from benchc.gates.budget import count_gates

    cases = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "benchc_vsi_figure" in params:
            cases.append(("vsi", (params["benchc_vsi_figure"],)))
        elif "benchc_model_figure" in params:
            cases.append(("model", (params["benchc_model_figure"],)))
        else:
            marker = next((m for m in _LEVEL_OF_MARKER if item.get_closest_marker(m)), None)
            if "benchc_sample_case" in params:
                cases.append(("sample", None))
            elif marker is not None:
                cases.append((_LEVEL_OF_MARKER[marker], None))
    return count_gates(cases)  # type: ignore[arg-type]


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    if SESSION not in config.stash:  # no suite case was collected
        return
    from benchc.suite import collect

    collect.shape(config, items)  # the cases' keywords, before -k reads them


def _budget(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The run's false-alarm budget over the gates of the cases that survived ``-k``/``-m``
    (a subset run spends the whole budget on its own gates: :mod:`benchc.gates.budget`)."""
    from benchc.gates.budget import ErrorBudget

    state = _session(config)
    cfg = state.cfg
    config.stash[BUDGET] = ErrorBudget(
        cfg.false_alarm_budget, _gate_counts(items), looks=cfg.looks, look=cfg.look,
        fractions=_fractions(state) if cfg.looks > 1 else None,
    )  # fmt: skip


def _fractions(state: SuiteSession) -> tuple[float, ...]:
    """A sequential gate's information at each look: this look's ``--limit`` of the samples
    the baseline was recorded on (:func:`benchc.gates.budget.look_fractions`)."""
    from benchc.gates.budget import look_fractions

    cfg = state.cfg
    total = state.baseline.recorded_n() or len(state.dataset)
    n = min(cfg.limit or total, total)
    return look_fractions(n, total, cfg.looks, cfg.look)


@pytest.hookimpl(tryfirst=True)  # before xdist's worker sends its collection to the controller
def pytest_collection_finish(session: pytest.Session) -> None:
    """Load what the cases that survived ``-k``/``-m`` need: nothing when none is the suite's.
    A worker that cannot load runs none of the suite's cases, so it must drop them before xdist
    reports what it collected."""
    config, items = session.config, session.items
    if SESSION not in config.stash:
        return
    from benchc.suite import collect, xdist

    if config.option.collectonly or not any(collect.is_suite_item(i) for i in items):
        return
    _budget(config, items)
    state = _session(config)
    error = collect.prepare(config, items, state, worker=xdist.worker_id(config) is not None)
    if error:
        config.stash[LOAD_ERROR] = error


def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller collects nothing, so it validates dataset and model here."""
    config = session.config
    if SESSION not in config.stash:
        return
    from benchc.suite import collect, xdist

    controller = xdist.worker_id(config) is None and xdist.worker_count(config) > 0
    if controller and not config.option.collectonly:
        with usage_error():
            collect.check_sources(config, _session(config))


# -- fixtures (the session ones: benchc.suite.fixtures) -----------------------------------
@pytest.fixture
def benchc_gate(
    snapshot,
    benchc_session: SuiteSession,
    request: pytest.FixtureRequest,
    capsys,
    record_testsuite_property,
) -> Iterator[GateCheck]:
    """``benchc_gate(payload)``: the gate engine's decision for one case (a paired check
    against its snapshot in the baseline), or its recording under ``--snapshot-update``."""
    from benchc.gates.snapshot import extension_for
    from benchc.suite.gate import GateCheck
    from benchc.suite.progress import uncaptured_by

    config = request.config
    update = bool(config.getoption("update_snapshots", False))
    engine = _engine(config, benchc_session)
    ext = extension_for(engine.baseline.folder.parent, engine.baseline.folder.name, update=update)
    node = request.node
    sides = benchc_session.sides()
    config.stash[SUITE_PROPERTY] = record_testsuite_property  # the run's verdict, at the end

    def sink(case: str, record: dict) -> None:
        config.stash[VERDICTS].append(record)
        try:
            from benchc.report.ci import record as record_property
        except ImportError:
            return
        record_property(node, record, sides)

    check = GateCheck(snapshot.use_extension(ext), benchc_session.cfg, node, update=update,
                      engine=engine, sink=sink)  # fmt: skip
    with uncaptured_by(capsys.disabled):  # the case's cells compute (and report progress) here
        yield check


def _engine(config: pytest.Config, state: SuiteSession):
    """This process's gate engine (one per session: its budget over the collected gates)."""
    if ENGINE not in config.stash:
        from benchc.gates.budget import ErrorBudget
        from benchc.suite.gate import engine_for

        cfg = state.cfg
        budget = config.stash.get(BUDGET, None) or ErrorBudget(
            cfg.false_alarm_budget, looks=cfg.looks, look=cfg.look,
            fractions=_fractions(state) if cfg.looks > 1 else None,
        )  # fmt: skip
        config.stash[ENGINE] = engine_for(cfg, state.baseline, budget, config)
    return config.stash[ENGINE]


# -- reporting ------------------------------------------------------------------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if SESSION not in config.stash:
        return
    from benchc.suite.changes import refresh

    refresh(config, _session(config))  # a server's own report of itself, once it answered
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker hands its results to the controller
        workeroutput["benchc_run_dirs"] = sorted(config.stash[RUN_DIRS])
        workeroutput["benchc_verdicts"] = list(config.stash[VERDICTS])
        workeroutput["benchc_errored"] = list(config.stash[ERRORED])
        workeroutput["benchc_problems"] = list(config.stash[PROBLEMS])
        if BUDGET in config.stash:
            workeroutput["benchc_budget"] = config.stash[BUDGET].to_dict()
        state = _session(config)
        workeroutput["benchc_baseline"] = str(state.baseline.folder) if state.started else ""
        workeroutput["benchc_notes"] = _notes(config)
        workeroutput["benchc_changes"] = config.stash.get(CHANGES, None)
        if LOAD_ERROR in config.stash:
            workeroutput["benchc_error"] = config.stash[LOAD_ERROR]
        return
    if LOAD_ERROR in config.stash:  # a worker could not use the model or dataset
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        print(f"ERROR: {config.stash[LOAD_ERROR]}", file=sys.stderr)
        return
    # what follows writes after the results were computed: a failure is one line (printed
    # with the summary), never a traceback that costs the verdict or the exit code
    from benchc.suite.outputs import after_compute

    state = _session(config)
    errors = config.stash.setdefault(WRITE_ERRORS, [])
    if config.getoption("update_snapshots", False) and state.started:
        _, error = after_compute("the baseline's manifest", state.baseline.folder,
                                 lambda: _finish_recording(state))  # fmt: skip
        errors += [error] if error else []
    _, error = after_compute("the reports", None, lambda: errors.extend(_write_reports(config)))
    errors += [error] if error else []


def _finish_recording(state: SuiteSession) -> None:
    """Sweep the sidecars benchc wrote that no snapshot references, then the manifest."""
    from benchc.gates import sidecar
    from benchc.suite.provenance import record_baseline_manifest

    sidecar.sweep_unreferenced(state.baseline.folder)
    record_baseline_manifest(state)


def _write_reports(config: pytest.Config) -> list[str]:
    from benchc.suite.reports import write_reports

    state = _session(config)
    verdicts = [v for v in config.stash.get(VERDICTS, []) if v["status"] != "recorded"]
    sides = state.sides() if state.started else None
    notes = _sides(config)[2:] + [n for n in _notes(config) if "another environment" in n]
    from benchc.suite.overall import baseline_folder

    folder = baseline_folder(config)
    return write_reports(state.cfg, config.stash[RUN_DIRS], verdicts or None, sides=sides,
                         notes=notes, baseline_folder=folder,
                         overall=config.stash.get(OVERALL, None),
                         run_notes=_notes(config),
                         changes=config.stash.get(CHANGES, None))  # fmt: skip


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """A worker's run folders, verdicts, notes and load error, into the controller's."""
    stash, out = node.config.stash, getattr(node, "workeroutput", {})
    if SESSION not in stash:
        return
    stash[RUN_DIRS].update(out.get("benchc_run_dirs", []))
    stash[VERDICTS].extend(out.get("benchc_verdicts", []))
    stash[ERRORED].extend(out.get("benchc_errored", []))
    stash[PROBLEMS].extend(out.get("benchc_problems", []))
    if out.get("benchc_budget") and BUDGET not in stash:
        from benchc.gates.budget import ErrorBudget

        stash[BUDGET] = ErrorBudget.from_dict(out["benchc_budget"])
    if out.get("benchc_baseline"):
        stash[BASELINE] = out["benchc_baseline"]
    if out.get("benchc_error"):
        stash[LOAD_ERROR] = out["benchc_error"]
    if out.get("benchc_changes"):
        stash[CHANGES] = out["benchc_changes"]
    notes = stash.setdefault(NOTES, [])
    notes.extend(n for n in out.get("benchc_notes", []) if n not in notes)


def _notes(config: pytest.Config) -> list[str]:
    from benchc.suite.notes import session_notes

    return session_notes(_session(config), config.stash.get(NOTES, []))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if SESSION not in config.stash:
        return
    from benchc.suite.summary import gate_summary

    budget = config.stash.get(BUDGET, None)
    records = sorted(config.stash[VERDICTS], key=lambda r: (r["case"], r.get("figure") or ""))
    errored = config.stash.get(ERRORED, [])
    lines = gate_summary(records, budget.describe() if budget is not None else None,
                         overall=config.stash.get(OVERALL, None))  # fmt: skip
    dirs = sorted(config.stash[RUN_DIRS])
    notes = _notes(config)
    if not lines and not dirs and not notes and not config.stash.get(WRITE_ERRORS, []):
        return
    terminalreporter.section("benchc")
    for line in _sides(config):
        terminalreporter.write_line(line)
    from benchc.suite.changes import summary_lines

    for line in summary_lines(config):  # what changed since the baseline, on PASS too
        terminalreporter.write_line(line)
    for d in dirs:
        terminalreporter.write_line(f"results: {d}")
    for note in notes:
        terminalreporter.write_line(f"note: {note}", yellow=True)
    cfg = _session(config).cfg
    errors = config.stash.get(WRITE_ERRORS, [])
    if cfg.report is not None and dirs and not any("--report" in e for e in errors):
        terminalreporter.write_line(f"report: {Path(cfg.report) / 'report.html'}")
    for error in errors:
        terminalreporter.write_line(f"ERROR: benchc: {error}", red=True)
    for line in lines:
        terminalreporter.write_line(line)
    overall = config.stash.get(OVERALL, None)
    if overall is not None and not config.getoption("update_snapshots", False):
        for line in _after_look(cfg, overall.state, records):
            terminalreporter.write_line(line, yellow=True)
    if config.getoption("update_snapshots", False) and _session(config).started:
        from benchc.gates.recording import recording_block
        from benchc.suite.notes import baseline_warnings

        for warning in baseline_warnings(_session(config).run):
            terminalreporter.write_line(f"WARNING: recorded a baseline while {warning}", red=True)
        for line in recording_block(records, _session(config).baseline.label, errored):
            terminalreporter.write_line(line)


def _after_look(cfg, state: str, records: list[dict]) -> list[str]:
    """The sequential gate's next step (:func:`benchc.gates.looks.after_look`), with this run's
    command for a look."""
    from benchc.gates.looks import after_look
    from benchc.suite.messages import command

    return after_look(state, records, look=cfg.look, looks=cfg.looks,
                      command=lambda limit, look: command(cfg, limit=limit, look=look))  # fmt: skip


def _sides(config: pytest.Config) -> list[str]:
    """Which model was gated against which baseline (each with its source), and a smoke run's
    scope: the first lines of the summary."""
    state = _session(config)
    if not state.started:
        return []
    cfg, ref = state.cfg, state.baseline
    if config.getoption("update_snapshots", False):
        lines = [f"recording: {state.backend.name} ({cfg.model}) as baseline {ref.label}"]
    else:
        lines = [f"candidate: {state.backend.name} ({cfg.model})", f"baseline: {ref.label}"]
    if cfg.looks > 1:
        from benchc.gates.looks import coverage, header

        lines.append(header(cfg.look, cfg.looks, cfg.limit, coverage(config.stash[VERDICTS])))
    elif cfg.limit is not None:
        lines.append(
            f"smoke run (--limit {cfg.limit}): the gates compared the first {cfg.limit} samples "
            "with the same samples of the baseline"
        )
    return lines
