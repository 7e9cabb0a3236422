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
from benchc.gates import ErrorBudget, EvidenceError, Payload, figures
from benchc.gates.budget import DEFAULT_BUDGET
from benchc.gates.evidence import stored_grid
from benchc.gates.pipeline import check_case
from benchc.gates.snapshot import case_name, load_baseline, model_slug, recorded_vsi_support
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


def collect(
    run_dir: Path,
    thresholds_dir: Path,
    *,
    vsi_dir: Path | None = None,
    budget: float = DEFAULT_BUDGET,
    baseline_folder: Path | None = None,
) -> list[dict[str, Any]]:
    """One verdict record per gate (:meth:`benchc.gates.Outcome.to_dict`); cases without a
    snapshot, or whose snapshot is unusable, are ``unchecked`` records with the reason.
    ``vsi_dir``: the run folder of the VSI gates when they had a dataset of their own (the
    embedded VSI set); their gates share the run's false-alarm budget. ``baseline_folder``: the
    baseline checked against (default: the one named after the run's model)."""
    try:
        run = read_run(Path(run_dir))
        vsi_run = read_run(Path(vsi_dir)) if vsi_dir is not None else run
        grid = stored_grid(run)
    except (StoreError, EvidenceError, KeyError, OSError) as exc:
        why = f"stored run {display_path(run_dir)} is unreadable: {exc}"
        return [_unchecked("results", "grid", why)]
    info = _settings(run)
    seed = run.seed
    cases: dict[str, Payload] = {}
    placeholder = lambda level: 0.0  # noqa: E731 - MDRs are recomputed by the check below
    common = dict(model=run.model_name, dataset=run.dataset_name, seed=seed)
    if grid is not None:
        cases.update(grid_payloads(grid, info=info, z_for=placeholder, **common))
    folder = baseline_folder or Path(thresholds_dir) / model_slug(run.model_name)
    if vsi_run.vsi is not None:
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
    z = ErrorBudget.for_payloads(budget, cases.values()).z
    records: list[dict[str, Any]] = []
    for key, current in cases.items():
        case = _case(key)
        path = folder / f"{case_name(case)}.json"
        if not path.is_file():
            records.append(_unchecked(case, key, f"no threshold snapshot {display_path(path)}"))
            continue
        try:
            baseline = load_baseline(path)
        except (ValueError, KeyError, EvidenceError) as exc:
            records.append(_unchecked(case, key, str(exc)))
            continue
        result = check_case(baseline, current, z_for=z, seed=seed, where=display_path(path))
        if result.verdict is None:
            records.append(_unchecked(case, key, str(result.problem)))
            continue
        records.extend(o.to_dict(case) for o in result.verdict.outcomes)
    return records


def _unchecked(case: str, key: str, reason: str) -> dict[str, Any]:
    level, _, scope = key.partition(":")
    return {"case": case, "scope": scope or key, "level": level, "figure": None,
            "status": "unchecked", "reason": reason}  # fmt: skip


__all__ = ["collect", "stored_grid"]
