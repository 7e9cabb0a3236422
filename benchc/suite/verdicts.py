"""Gate verdicts of a stored run, offline: what ``benchc report RESULTS --baseline DIR`` shows.

The same cases the suite runs (cells, families, model-level figures, VSI), rebuilt from the
arrays a finished run stored and checked with the same :func:`benchc.gates.check` against the
threshold snapshots, so a report written hours later says exactly what the build said. The
paths in its reasons follow the report's one rule (:func:`benchc.fsutil.display_path`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchc.fsutil import display_path
from benchc.gates import EvidenceError, Payload, figures
from benchc.gates.baselines import locate, resolve
from benchc.gates.budget import DEFAULT_BUDGET, case_budget
from benchc.gates.engine import GateEngine, unchecked_record
from benchc.gates.evidence import stored_grid
from benchc.gates.snapshot import recorded_vsi_support
from benchc.results.reader import StoredRun, read_run
from benchc.results.store import StoreError
from benchc.suite.payloads import build_payload, grid_payloads
from benchc.suite.vsi import vsi_evidence
from benchc.suite.vsi import vsi_info as suite_vsi_info

#: Offline case key (see :func:`benchc.suite.payloads.grid_payloads`) -> pytest case name.
_TEST = {"cell": "test_cell", "family": "test_family", "model": "test_model", "vsi": "test_vsi"}


def _case(key: str) -> str:
    level, _, scope = key.partition(":")
    return f"{_TEST[level]}[{scope}]"


def _settings(run: StoredRun) -> dict[str, Any]:
    """The settings a stored run's payloads carry (:data:`benchc.gates.pipeline.SETTINGS_KEYS`,
    as the live suite's ``run_info`` gives them)."""
    return {
        "dataset_fingerprint": run.manifest.get("dataset_fingerprint"),
        "image_size": run.manifest.get("settings", {}).get("image_size"),
        "seed": run.seed,
    }


def _cases(run: StoredRun, vsi_run: StoredRun, grid, folder: Path) -> dict[str, Payload]:
    """The payloads of a stored run's cases, keyed ``level:scope`` as the suite's cases."""
    info = _settings(run)
    cases: dict[str, Payload] = {}
    placeholder = lambda level: 0.0  # noqa: E731 - MDRs are recomputed by the engine's check
    common = dict(model=run.model_name, dataset=run.dataset_name, seed=run.seed)
    if grid is not None:
        cases.update(grid_payloads(grid, info=info, z_for=placeholder, **common))
    if vsi_run.vsi is None:
        return cases
    support = recorded_vsi_support(folder)
    ev = vsi_evidence(vsi_run.vsi, list(vsi_run.ids), support)
    # the live suite's VSI info (variant, sklearn, regions); the locator as the stored name
    # records it ("vsi-aligned.<locator slug>")
    locator = (vsi_run.vsi_name or "").partition(".")[2] or "none"
    vsi_info = {
        **info,
        **{k: v for k, v in _settings(vsi_run).items() if k != "seed"},
        **suite_vsi_info(vsi_run.vsi, locator, support),
    }
    vsi_common = {**common, "dataset": vsi_run.dataset_name}
    for f in figures("vsi", gated_only=True):
        cases[f"vsi:{f.name}"] = build_payload(
            ev, level="vsi", scope="vsi", names=[f.name], info=vsi_info, z_for=placeholder,
            **vsi_common,
        )  # fmt: skip
    return cases


def collect(
    run_dir: Path,
    thresholds_dir: Path,
    *,
    vsi_dir: Path | None = None,
    budget: float = DEFAULT_BUDGET,
    baseline_folder: Path | None = None,
) -> list[dict[str, Any]]:
    """One verdict record per gate (:meth:`benchc.gates.Outcome.to_dict`), decided by the gate
    engine; cases without a snapshot, or whose snapshot is unusable, are ``unchecked`` records
    with the reason. ``vsi_dir``: the run folder of the VSI gates when they had a dataset of
    their own (the embedded VSI set); their gates share the run's false-alarm budget.
    ``baseline_folder``: the baseline checked against (default: the one named after the run's
    model)."""
    try:
        run = read_run(Path(run_dir))
        vsi_run = read_run(Path(vsi_dir)) if vsi_dir is not None else run
        grid = stored_grid(run)
    except (StoreError, EvidenceError, KeyError, OSError) as exc:
        why = f"stored run {display_path(run_dir)} is unreadable: {exc}"
        return [unchecked_record("results", "grid", why)]
    if baseline_folder is not None:
        ref = locate(Path(baseline_folder))
    else:
        ref = resolve(Path(thresholds_dir), None, run.model_name)
    cases = _cases(run, vsi_run, grid, ref.folder)
    engine = GateEngine(ref, budget=case_budget(budget, cases.values()), seed=run.seed)
    return engine.check_stored(cases, _case)


__all__ = ["collect", "stored_grid"]
