"""Collection for the plugin: the suite's markers, parametrisation, case keywords, and the checks
that fail a run once, before any case, when the model or dataset cannot be used.

Kept out of ``benchc.plugin`` so its hooks stay a few lines each; nothing here holds state (the
session's lives in :class:`benchc.suite.session.SuiteSession`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from benchc.suite.markers import MARKERS, PER_SAMPLE_OFF, register_markers  # noqa: F401
from benchc.suite.session import LoadError

if TYPE_CHECKING:
    from benchc.suite.session import SuiteSession


def _params(item: pytest.Item) -> dict[str, Any]:
    return getattr(getattr(item, "callspec", None), "params", {})


def is_suite_item(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(m) for m in MARKERS)


def deselect(config: pytest.Config, items: list[pytest.Item], gone: list[pytest.Item]) -> None:
    """Drop ``gone`` from ``items`` in place, reported as deselected."""
    if gone:
        config.hook.pytest_deselected(items=gone)
        dropped = {id(i) for i in gone}
        items[:] = [i for i in items if id(i) not in dropped]


def parametrize(metafunc: pytest.Metafunc, session: SuiteSession) -> None:
    """One case per selected cell, family, gated figure and (``--per-sample``) sample."""
    from benchc.gates.figures import figures
    from benchc.suite.payloads import family_cells

    names = metafunc.fixturenames
    cfg = session.cfg
    if "benchc_cell" in names:
        metafunc.parametrize("benchc_cell", cfg.conditions, ids=cfg.conditions)
    if "benchc_family" in names:
        fams = list(family_cells(cfg.conditions))
        metafunc.parametrize("benchc_family", fams, ids=fams)
    for level in ("model", "vsi"):
        if f"benchc_{level}_figure" in names:
            gated = [f.name for f in figures(level, gated_only=True)]
            metafunc.parametrize(f"benchc_{level}_figure", gated, ids=gated)
    if "benchc_sample_case" in names:
        if not cfg.per_sample:
            metafunc.parametrize("benchc_sample_case", [None], ids=[PER_SAMPLE_OFF])
            return
        try:
            ids = session.dataset.ids
        except LoadError as exc:
            raise pytest.UsageError(f"benchc: {exc}") from None
        cases = [(c, sid) for c in cfg.conditions for sid in ids]
        metafunc.parametrize("benchc_sample_case", cases, ids=[f"{c}-{s}" for c, s in cases])


def case_facts(item: pytest.Item) -> dict[str, object]:
    """What a suite case covers: corruption, family, severity, figure, sample."""
    from benchc import spec

    params = _params(item)
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


def mark_case(item: pytest.Item) -> None:
    """Whole-name selection: ``-k`` matches substrings (``-k ras`` also hits ``contrast-1``), so
    every suite case gets keywords ``figure:ras``, ``corruption:fog``, ``family:blur``,
    ``severity:3`` for ``-k`` and a ``benchc_case(...)`` marker for ``-m``."""
    if not is_suite_item(item):
        return
    facts = case_facts(item)
    if not facts:
        return
    item.add_marker(pytest.mark.benchc_case(**facts))
    item.extra_keyword_matches.update(f"{k}:{v}" for k, v in facts.items())


def shape(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the ``--per-sample`` placeholders (not a user's deselection: never counted as
    ``deselected``) and give every case its keywords and marker."""
    items[:] = [i for i in items if PER_SAMPLE_OFF not in i.name]
    for item in items:
        mark_case(item)


def planned_conditions(items: list[pytest.Item], grid: list[str]) -> list[str]:
    """Conditions in the order the selected cases will need them (for the prefetch)."""
    planned: list[str] = []
    for item in items:
        params = _params(item)
        if "benchc_cell" in params:
            planned.append(params["benchc_cell"])
        elif params.get("benchc_sample_case"):
            planned.append(params["benchc_sample_case"][0])
        elif item.get_closest_marker("benchc_model") or item.get_closest_marker("benchc_family"):
            planned.extend(grid)
    return list(dict.fromkeys(planned))


def planned_rotations(items: list[pytest.Item], grid: list[str]) -> list[str]:
    """The rotated conditions (docs/spec.md §1, option order) the selected cases read: a family
    case its family's, a model case gating an option-order figure the whole selection's."""
    from benchc import spec
    from benchc.gates.figures import reads_rotations

    rotated = spec.order_conditions(grid)
    wanted: set[str] = set()
    for item in items:
        params = _params(item)
        if "benchc_family" in params and reads_rotations("family"):
            cells = spec.family_cells(grid).get(params["benchc_family"], [])
            wanted.update(c for c in rotated if c == spec.CLEAN or c in cells)
        elif "benchc_model_figure" in params and reads_rotations(
            "model", [params["benchc_model_figure"]]
        ):
            wanted.update(rotated)
    return [c for c in rotated if c in wanted]


def drop_skipped_sample_cases(
    config: pytest.Config, items: list[pytest.Item], state: SuiteSession
) -> None:
    """``--per-sample`` cases were parametrised from the dataset as loaded; a sample that
    ``--lenient`` dropped once the model was known has no case to run."""
    if not state.cfg.per_sample:
        return
    ids = set(state.dataset.ids)
    facts = [(item, case_facts(item)) for item in items]
    deselect(config, items, [i for i, f in facts if "sample" in f and f["sample"] not in ids])


def prepare(
    config: pytest.Config, items: list[pytest.Item], state: SuiteSession, *, worker: bool
) -> str | None:
    """Load what the selected cases need, so that a model or dataset that cannot be used fails
    once, before any cell runs: a usage error, or in an xdist worker the message (returned)."""
    try:
        try:
            _load(config, items, state)
        except OSError as exc:  # the results store's first writes (the sample table)
            from benchc.suite.outputs import device_problem

            line = device_problem(state.cfg, exc)
            if line is None:
                raise
            raise LoadError(line) from None
    except LoadError as exc:
        if not worker:
            raise pytest.UsageError(f"benchc: {exc}") from None
        # an xdist worker cannot raise a usage error (the controller reports a crash): it
        # runs none of the suite's cases and hands the one message to the controller
        deselect(config, items, [i for i in items if is_suite_item(i)])
        return f"benchc: {exc}"
    return None


def _load(config: pytest.Config, items: list[pytest.Item], state: SuiteSession) -> None:
    from benchc.suite.preflight import check_baseline

    _check_outputs(config, state)
    state.planned_conditions = planned_conditions(items, state.cfg.conditions)
    state.planned_rotations = planned_rotations(items, state.cfg.conditions)
    _ = state.dataset
    suite = [i for i in items if is_suite_item(i)]
    vsi = any("benchc_vsi_figure" in _params(i) for i in suite)
    check = dict(
        update=bool(config.getoption("update_snapshots", False)),
        grid=any("benchc_vsi_figure" not in _params(i) for i in suite),
        vsi=vsi,
    )
    if state.cfg.baseline is not None:  # named: checked before the model loads
        check_baseline(state, **check)
    with elsewhere(state, vsi=vsi) as fill:  # --executor=ray, --from-store: no local model
        _ = state.backend
        state.check_model_inputs()
        if state.cfg.baseline is None:  # the model's own name: known once it loaded
            check_baseline(state, **check)
        if not check["update"]:  # checked against the run's route before its first query
            from benchc.gates.baselines import read_manifest

            state.expected_route = read_manifest(state.baseline.folder).get("option_access")
        drop_skipped_sample_cases(config, items, state)
        if any("benchc_vsi_figure" in _params(i) for i in items):
            _ = state.vsi_run  # the VSI gates' dataset: its errors come before any case too
        fill(stored_entries(state, grid=check["grid"], vsi=vsi))
    from benchc.suite import changes, probe

    probe.probe(state)  # one real query before the grid: a model that cannot take its input
    if not check["update"]:
        changes.compute(config, state)  # "changed since baseline", for every verdict


def stored_entries(state: SuiteSession, *, grid: bool, vsi: bool) -> dict[str, list[str]]:
    """The stored entries the selected cases read: run tag (``grid``, ``vsi``) -> names."""
    from benchc import spec
    from benchc.results.reader import order_name

    out: dict[str, list[str]] = {}
    if grid and state.planned_conditions:
        rotated = [order_name(c) for c in state.planned_rotations]
        out["grid"] = [spec.CLEAN, *state.planned_conditions, *rotated]
    if vsi:
        out["vsi"] = [state.vsi_run.vsi_name]
    return out


@contextlib.contextmanager
def elsewhere(state: SuiteSession, *, vsi: bool) -> Iterator[Callable[[dict], None]]:
    """Where results computed elsewhere come in: the executor ``--executor`` names, from the
    registry (``benchc.executors`` entry points): a Ray cluster's actors compute the missing
    chunks (``ray``), ``--from-store`` reads a finished store (``stored``); yields what fills or
    checks the entries the cases read. A plain run (``local``) yields a no-op."""
    from benchc.registry import EXECUTORS, ExtensionError, UnknownExtension
    from benchc.results import StoreError

    cfg = state.cfg
    try:
        executor = EXECUTORS.load("stored" if cfg.from_store is not None else cfg.executor)
        with executor(state, vsi=vsi) as fill:
            yield fill
    except (StoreError, ExtensionError, UnknownExtension) as exc:
        raise LoadError(str(exc) + _mend(state, exc)) from None


def _mend(state: SuiteSession, exc: Exception) -> str:
    """The command that recomputes a damaged file of a local ``--from-store`` store: this run
    with the store as its own ``--results-dir`` (only the damaged file is recomputed)."""
    from benchc.suite.messages import command

    store = state.cfg.from_store
    if store is None or "://" in str(store) or "only reads this store" not in str(exc):
        return ""
    return f"\n  the command that recomputes it: {command(state.cfg, results_dir=Path(store))}"


def _check_outputs(config: pytest.Config, state: SuiteSession) -> None:
    """Every folder the run writes into, before anything is loaded or computed."""
    from benchc.suite.outputs import output_problem

    problem = output_problem(state.cfg, update=bool(config.getoption("update_snapshots", False)))
    if problem is not None:
        raise LoadError(problem)


def check_sources(config: pytest.Config, state: SuiteSession) -> None:
    """Output folders, dataset and model source, where nothing is collected (the xdist
    controller)."""
    from benchc.suite.session import check_model_source

    _check_outputs(config, state)
    _ = state.dataset
    check_model_source(state.cfg)
