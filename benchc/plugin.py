"""The benchc pytest plugin (options, session model fixture, cell and model gates).

Registered both by the root ``conftest.py`` and as the ``pytest11`` entry point ``benchc.plugin``;
the shared name keeps pytest from loading it twice. The suite's cases live in
``benchc_tests/suite``; this module only wires options, fixtures, parametrisation and reporting.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import pytest

from benchc.suite.config import ConfigError, SuiteConfig
from benchc.suite.session import LoadError, SuiteSession

SESSION = pytest.StashKey[SuiteSession]()
RUN_DIRS = pytest.StashKey[set]()
NOTES = pytest.StashKey[list]()
LOAD_ERROR = pytest.StashKey[str]()

#: Every gate's verdict record (:meth:`benchc.gates.Outcome.to_dict`), for summary and report.
VERDICTS = pytest.StashKey[list]()
#: The run's false-alarm budget split over the gates that were collected.
BUDGET = pytest.StashKey["ErrorBudget"]()

_MARKERS = {
    "benchc_cell": "one (corruption, severity) cell of the robustness suite",
    "benchc_family": "a corruption-family gate (noise, blur, weather, photometric, digital)",
    "benchc_model": "a model-level robustness gate",
    "benchc_sample": "a per-sample drill-down case (--per-sample)",
    "benchc_case": "what a suite case covers: corruption, family, severity, figure, sample "
    "(select with -m \"benchc_case(family='blur')\" or -k family:blur)",
}
#: Which gate level each case marker checks (for the false-alarm budget).
_LEVEL_OF_MARKER = {"benchc_cell": "cell", "benchc_family": "family", "benchc_model": "model"}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("benchc", "benchc structural-robustness suite")
    add = group.addoption
    add(
        "--model",
        dest="benchc_model",
        default=None,
        metavar="ID_OR_DIR",
        help="model under test: hub id or checkpoint folder (default: fixtures/tiny-vlm)",
    )
    add(
        "--model-args",
        dest="benchc_model_args",
        default=None,
        metavar="K=V,...",
        help="backend arguments, lm-eval style: device_map=auto,attn_implementation=sdpa,"
        "max_pixels=401408 (hf); concurrency=8,rate_limit=5,top_logprobs=20 (openai)",
    )
    add("--revision", dest="benchc_revision", default=None, help="hub revision of --model")
    add(
        "--trust-remote-code",
        dest="benchc_trust_remote_code",
        action="store_true",
        help="allow the model's own code from the hub",
    )
    add(
        "--dataset",
        dest="benchc_dataset",
        default=None,
        metavar="PATH",
        help="dataset folder or file (default: fixtures/testbed)",
    )
    add(
        "--corruptions",
        dest="benchc_corruptions",
        default=None,
        metavar="LIST",
        help="comma list of corruptions and/or families (noise,blur,...); default all 19",
    )
    add(
        "--severities",
        dest="benchc_severities",
        default=None,
        metavar="LIST",
        help="comma list or range of severities, e.g. 1,3,5 or 2-4; default 1-5",
    )
    add(
        "--image-size",
        dest="benchc_image_size",
        type=int,
        default=None,
        metavar="PX",
        help="longer image side before corruption (default: native for the embedded "
        "testbed, else 448)",
    )
    add(
        "--batch-size",
        dest="benchc_batch_size",
        type=int,
        default=None,
        help="queries per forward pass (default: the backend's)",
    )
    add(
        "--device",
        dest="benchc_device",
        default="auto",
        help="auto (GPU when present, one per xdist worker), cpu, cuda, cuda:1, ...",
    )
    add("--dtype", dest="benchc_dtype", default=None, help="float32, bfloat16, float16")
    add(
        "--seed",
        dest="benchc_seed",
        type=int,
        default=0,
        help="seed of corruptions and bootstrap (default 0)",
    )
    add(
        "--results-dir",
        dest="benchc_results_dir",
        default=None,
        metavar="DIR",
        help="resumable results store (default .benchc/results)",
    )
    add(
        "--cache-dir",
        dest="benchc_cache_dir",
        default=None,
        metavar="DIR",
        help="corruption cache (default $BENCHC_CACHE_DIR or ~/.cache/benchc/corruptions)",
    )
    add(
        "--thresholds-dir",
        dest="benchc_thresholds_dir",
        default=None,
        metavar="DIR",
        help="threshold snapshots, one folder per model (default thresholds/)",
    )
    add(
        "--report",
        dest="benchc_report",
        default=None,
        metavar="DIR",
        help="write DIR/report.html (self-contained) and DIR/report.json at the end of the run",
    )
    add(
        "--per-sample",
        dest="benchc_per_sample",
        action="store_true",
        help="add corruption x severity x sample drill-down cases",
    )
    add(
        "--region-locator",
        dest="benchc_region_locator",
        default="none",
        metavar="NAME",
        help="VSI region for samples without one: none (blur the whole image), foreground, "
        "or module:callable",
    )
    add(
        "--lenient",
        dest="benchc_lenient",
        action="store_true",
        help="skip bad dataset samples (counted in the summary) instead of a usage error",
    )
    add(
        "--allow-outside-root",
        dest="benchc_allow_outside_root",
        action="store_true",
        help="let dataset image/mask paths point outside the dataset folder (shared folders)",
    )
    add(
        "--lock-timeout",
        dest="benchc_lock_timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds to wait for a results lock held by another host (default "
        "$BENCHC_LOCK_TIMEOUT or 600)",
    )
    add(
        "--vsi-dataset",
        dest="benchc_vsi_dataset",
        default=None,
        metavar="PATH",
        help="dataset of the VSI gates (default: fixtures/vsi-set with the embedded testbed, "
        "else --dataset)",
    )
    add(
        "--false-alarm-budget",
        dest="benchc_false_alarm_budget",
        type=float,
        default=None,
        metavar="P",
        help="probability that any gate fails when nothing changed; split over the gates that "
        "run into each gate's z (default 0.01)",
    )
    add(
        "--strict-gates",
        dest="benchc_strict_gates",
        action="store_true",
        help="a gate that cannot be checked fails instead of being reported (release CI)",
    )
    add("--benchc-degrade", dest="benchc_degrade", default=None, help=argparse.SUPPRESS)


def _worker_id(config: pytest.Config) -> str | None:
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else None


def _xdist_workers(config: pytest.Config) -> int:
    n = config.getoption("numprocesses", None)
    if n in (None, 0):
        return 0
    if isinstance(n, int):
        return n
    return os.cpu_count() or 2  # "auto" / "logical"


def pytest_configure(config: pytest.Config) -> None:
    for name, text in _MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    try:
        cfg = SuiteConfig.from_options(
            config.getoption, rootdir=Path(config.rootpath), worker_id=_worker_id(config)
        )
    except ConfigError as exc:
        raise pytest.UsageError(f"benchc: {exc}") from None
    if config.getoption("update_snapshots", False) and _xdist_workers(config) > 1:
        raise pytest.UsageError(
            "benchc: --snapshot-update under pytest-xdist with more than one worker is refused "
            "(workers would race on the threshold files); rerun with -n 0 or -p no:xdist"
        )
    config.stash[SESSION] = SuiteSession(cfg)
    config.stash[RUN_DIRS] = set()
    config.stash[VERDICTS] = []
    if config.get_verbosity() < 0:  # -q: no weight-loading bars
        _quiet_progress_bars()


def _quiet_progress_bars() -> None:
    if "transformers" in sys.modules:  # already imported: it read the environment then
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    else:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def _session(config: pytest.Config) -> SuiteSession:
    return config.stash[SESSION]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    from benchc.gates.figures import figures
    from benchc.suite.payloads import family_cells

    names = metafunc.fixturenames
    session = _session(metafunc.config)
    cfg = session.cfg
    if "benchc_cell" in names:
        metafunc.parametrize("benchc_cell", cfg.conditions, ids=cfg.conditions)
    if "benchc_family" in names:
        fams = list(family_cells(cfg.conditions))
        metafunc.parametrize("benchc_family", fams, ids=fams)
    if "benchc_model_figure" in names:
        model = [f.name for f in figures("model", gated_only=True)]
        metafunc.parametrize("benchc_model_figure", model, ids=model)
    if "benchc_vsi_figure" in names:
        vsi = [f.name for f in figures("vsi", gated_only=True)]
        metafunc.parametrize("benchc_vsi_figure", vsi, ids=vsi)
    if "benchc_sample_case" in names:
        if not cfg.per_sample:
            metafunc.parametrize("benchc_sample_case", [None], ids=["per-sample-off"])
            return
        try:
            ids = session.dataset.ids
        except LoadError as exc:
            raise pytest.UsageError(f"benchc: {exc}") from None
        cases = [(c, sid) for c in cfg.conditions for sid in ids]
        metafunc.parametrize("benchc_sample_case", cases, ids=[f"{c}-{s}" for c, s in cases])


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


def _is_suite_item(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in _MARKERS)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    off = [i for i in items if "per-sample-off" in i.name]
    if off:
        config.hook.pytest_deselected(items=off)
        items[:] = [i for i in items if "per-sample-off" not in i.name]
    for item in items:
        _mark_case(item)
    if config.option.collectonly or not any(_is_suite_item(i) for i in items):
        return
    state = _session(config)
    from benchc.gates.budget import ErrorBudget

    config.stash[BUDGET] = ErrorBudget(state.cfg.false_alarm_budget, _gate_counts(items))
    state.planned_conditions = _planned_conditions(items, state.cfg.conditions)
    try:  # fail once, before any cell runs, when the model or dataset cannot be used
        _ = state.dataset
        _ = state.backend
        _check_model_inputs(state)
        _drop_skipped_sample_cases(config, items, state)
        if any("benchc_vsi_figure" in getattr(getattr(i, "callspec", None), "params", {})
               for i in items):  # fmt: skip
            _ = state.vsi_run  # the VSI gates' dataset: its errors come before any case too
    except LoadError as exc:
        if _worker_id(config) is None:
            raise pytest.UsageError(f"benchc: {exc}") from None
        # an xdist worker cannot raise a usage error (the controller reports a crash): it
        # runs none of the suite's cases and hands the one message to the controller
        config.stash[LOAD_ERROR] = f"benchc: {exc}"
        suite = [i for i in items if _is_suite_item(i)]
        config.hook.pytest_deselected(items=suite)
        items[:] = [i for i in items if not _is_suite_item(i)]


def _check_model_inputs(state: SuiteSession) -> None:
    """Prompt length against the model's context and its special tokens in the text: once the
    model is loaded, before any case (``--lenient`` drops the samples instead)."""
    from benchc.suite.inputs import check_for_model

    try:
        state._dataset = check_for_model(state.dataset, state.backend, lenient=state.cfg.lenient)
    except ValueError as exc:
        msg = f"--dataset {state.cfg.dataset!r} cannot be used with this model: {exc}"
        raise LoadError(msg) from None


def _drop_skipped_sample_cases(
    config: pytest.Config, items: list[pytest.Item], state: SuiteSession
) -> None:
    """``--per-sample`` cases were parametrised from the dataset as loaded; a sample that
    ``--lenient`` dropped once the model was known has no case to run."""
    if not state.cfg.per_sample:
        return
    ids = set(state.dataset.ids)
    gone = []
    for item in items:
        facts = _case_facts(item)
        if "sample" in facts and facts["sample"] not in ids:
            gone.append(item)
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [i for i in items if i not in gone]


def _case_facts(item: pytest.Item) -> dict[str, object]:
    from benchc import spec

    params = getattr(getattr(item, "callspec", None), "params", {})
    facts: dict[str, object] = {}
    cell = params.get("benchc_cell")
    if params.get("benchc_sample_case"):
        cell, facts["sample"] = params["benchc_sample_case"]
    if cell:
        corruption, severity = spec.parse_condition(cell)
        if corruption is not None:
            facts.update(
                corruption=corruption, family=spec.FAMILY_OF[corruption], severity=severity
            )
    if "benchc_family" in params:
        facts["family"] = params["benchc_family"]
    for key in ("benchc_model_figure", "benchc_vsi_figure"):
        if key in params:
            facts["figure"] = params[key]
    return facts


def _mark_case(item: pytest.Item) -> None:
    """Whole-name selection: ``-k`` matches substrings (``-k ras`` also hits ``contrast-1``), so
    every suite case gets keywords ``figure:ras``, ``corruption:fog``, ``family:blur``,
    ``severity:3`` for ``-k`` and a ``benchc_case(...)`` marker for ``-m``."""
    if not _is_suite_item(item):
        return
    facts = _case_facts(item)
    if not facts:
        return
    item.add_marker(pytest.mark.benchc_case(**facts))
    item.extra_keyword_matches.update(f"{k}:{v}" for k, v in facts.items())


def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller collects nothing, so it validates dataset and model here."""
    config = session.config
    if _worker_id(config) is not None or _xdist_workers(config) == 0:
        return
    if config.option.collectonly:
        return
    from benchc.suite.session import check_model_source

    state = _session(config)
    try:
        _ = state.dataset
        check_model_source(state.cfg)
    except LoadError as exc:
        raise pytest.UsageError(f"benchc: {exc}") from None


def _planned_conditions(items: list[pytest.Item], grid: list[str]) -> list[str]:
    """Conditions in the order the selected cases will need them (for the prefetch)."""
    planned: list[str] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "benchc_cell" in params:
            planned.append(params["benchc_cell"])
        elif params.get("benchc_sample_case"):
            planned.append(params["benchc_sample_case"][0])
        elif item.get_closest_marker("benchc_model") or item.get_closest_marker("benchc_family"):
            planned.extend(grid)
    return list(dict.fromkeys(planned))


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def benchc_session(pytestconfig: pytest.Config) -> SuiteSession:
    """The process-wide suite state (config, dataset, backend, run)."""
    return _session(pytestconfig)


@pytest.fixture(scope="session")
def benchc_config(benchc_session: SuiteSession) -> SuiteConfig:
    return benchc_session.cfg


@pytest.fixture(scope="session")
def benchc_run(benchc_session: SuiteSession, pytestconfig: pytest.Config):
    """The model under test on the dataset, backed by the results store (one per process)."""
    run = benchc_session.run
    pytestconfig.stash[RUN_DIRS].add(str(run.store.run_dir))
    if _worker_id(pytestconfig) is None:  # xdist workers are the parallelism already
        run.start_prefetch(benchc_session.planned_conditions)
    yield run
    run.stop_prefetch()


@pytest.fixture(scope="session")
def benchc_vsi_run(benchc_session: SuiteSession, pytestconfig: pytest.Config):
    """The model on the VSI gates' dataset (the embedded VSI set by default)."""
    run = benchc_session.vsi_run
    pytestconfig.stash[RUN_DIRS].add(str(run.store.run_dir))
    return run


@pytest.fixture
def benchc_gate(snapshot, benchc_session: SuiteSession, request: pytest.FixtureRequest):
    """``benchc_gate(payload)``: a paired check against ``thresholds/<slug>/<case>.json``."""
    from benchc.gates.budget import ErrorBudget
    from benchc.gates.snapshot import extension_for, model_slug
    from benchc.suite.gate import GateCheck

    cfg = benchc_session.cfg
    config = request.config
    update = bool(config.getoption("update_snapshots", False))
    budget = config.stash.get(BUDGET, None) or ErrorBudget(cfg.false_alarm_budget)
    ext = extension_for(
        cfg.thresholds_dir,
        model_slug(benchc_session.backend.name),
        update=update,
        budget=budget,
        seed=cfg.seed,
    )
    node = request.node

    def sink(case: str, record: dict) -> None:
        config.stash[VERDICTS].append(record)
        try:
            from benchc.report.ci import record as record_property
        except ImportError:
            return
        record_property(node, record)

    return GateCheck(
        snapshot.use_extension(ext),
        cfg,
        node,
        update=update,
        budget=budget,
        strict=cfg.strict_gates,
        sink=sink,
    )


# -- reporting ------------------------------------------------------------------------------
def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    if SESSION not in config.stash:
        return
    workeroutput = getattr(config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker hands its results to the controller
        workeroutput["benchc_run_dirs"] = sorted(config.stash[RUN_DIRS])
        workeroutput["benchc_verdicts"] = list(config.stash[VERDICTS])
        workeroutput["benchc_notes"] = _notes(config)
        if LOAD_ERROR in config.stash:
            workeroutput["benchc_error"] = config.stash[LOAD_ERROR]
        return
    if LOAD_ERROR in config.stash:  # a worker could not use the model or dataset
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        print(f"ERROR: {config.stash[LOAD_ERROR]}", file=sys.stderr)
        return
    cfg = _session(config).cfg
    if config.getoption("update_snapshots", False):
        from benchc.gates import sidecar

        sidecar.sweep_unreferenced(cfg.thresholds_dir)
    _write_reports(config)


def _write_reports(config: pytest.Config) -> None:
    """``--report DIR``: the HTML page and JSON of this run with its gate verdicts; the
    Markdown verdict table into ``$GITHUB_STEP_SUMMARY`` when CI sets it."""
    from benchc.report import ci

    cfg = _session(config).cfg
    verdicts = list(config.stash.get(VERDICTS, [])) or None
    dirs = [Path(d) for d in sorted(config.stash[RUN_DIRS])]
    page = None
    if cfg.report is not None and dirs:
        from benchc.report import compare_runs, write_report
        from benchc.results.reader import group_runs

        try:
            from benchc.suite.gate import record_command
        except ImportError:  # the gates moved it: the report then builds one from the manifest
            record_command = None
        groups = group_runs(dirs)  # the grid run and, with its own dataset, the VSI run
        if len(groups) == 1:
            page = write_report(
                groups[0][0],
                cfg.report,
                vsi_dir=groups[0][1],
                thresholds_dir=cfg.thresholds_dir,
                verdicts=verdicts,
                verdict_note=None if verdicts else "no gate verdicts were recorded in this run",
                record_command=record_command(cfg) if record_command else None,
            )
        else:
            page = compare_runs([g for g, _ in groups], cfg.report, vsi_dirs=[v for _, v in groups])
    if verdicts:
        ci.write_step_summary(verdicts, report=str(page) if page else None)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    out = getattr(node, "workeroutput", {})
    if SESSION in node.config.stash:
        node.config.stash[RUN_DIRS].update(out.get("benchc_run_dirs", []))
        node.config.stash[VERDICTS].extend(out.get("benchc_verdicts", []))
        error = getattr(node, "workeroutput", {}).get("benchc_error")
        if error:
            node.config.stash[LOAD_ERROR] = error
        notes = node.config.stash.setdefault(NOTES, [])
        notes.extend(
            n for n in getattr(node, "workeroutput", {}).get("benchc_notes", []) if n not in notes
        )


def _notes(config: pytest.Config) -> list[str]:
    """This process's run notes (``benchc.suite.notes.run_notes``), plus its workers'."""
    from benchc.suite.notes import run_notes

    state = _session(config)
    notes = list(config.stash.get(NOTES, []))
    if state.started:
        notes += [n for n in run_notes(state.run) + state.backend.notes() if n not in notes]
    return notes


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    if SESSION not in config.stash:
        return
    from benchc.suite.summary import gate_summary

    budget = config.stash.get(BUDGET, None)
    records = sorted(config.stash[VERDICTS], key=lambda r: (r["case"], r.get("figure") or ""))
    lines = gate_summary(records, budget.describe() if budget is not None else None)
    dirs = sorted(config.stash[RUN_DIRS])
    notes = _notes(config)
    if not lines and not dirs and not notes:
        return
    terminalreporter.section("benchc")
    for d in dirs:
        terminalreporter.write_line(f"results: {d}")
    for note in notes:
        terminalreporter.write_line(f"note: {note}", yellow=True)
    cfg = _session(config).cfg
    if cfg.report is not None and dirs:
        terminalreporter.write_line(f"report: {Path(cfg.report) / 'report.html'}")
    for line in lines:
        terminalreporter.write_line(line)
    if config.getoption("update_snapshots", False) and _session(config).started:
        from benchc.suite.notes import baseline_warnings

        for warning in baseline_warnings(_session(config).run):
            terminalreporter.write_line(f"WARNING: recorded a baseline while {warning}", red=True)
