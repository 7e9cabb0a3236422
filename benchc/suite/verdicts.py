"""Gate verdicts of a stored run, offline: what ``benchc report RESULTS --baseline DIR`` shows.

The same cases the suite runs (cells, families, model-level figures, VSI), rebuilt from the
arrays a finished run stored and checked with the same :func:`benchc.gates.check` against the
threshold snapshots, so a report written hours later says exactly what the build said.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchc import spec
from benchc.gates import ErrorBudget, EvidenceError, GridEvidence, Payload, check, figures
from benchc.gates.budget import DEFAULT_BUDGET
from benchc.gates.snapshot import case_name, load_baseline, model_slug
from benchc.results.store import StoreError, load_npz
from benchc.suite.payloads import grid_payloads
from benchc.suite.vsi import vsi_evidence

#: Offline case key (see :func:`benchc.suite.payloads.grid_payloads`) -> pytest case name.
_TEST = {"cell": "test_cell", "family": "test_family", "model": "test_model", "vsi": "test_vsi"}


def _case(key: str) -> str:
    level, _, scope = key.partition(":")
    return f"{_TEST[level]}[{scope}]"


def stored_grid(run_dir: Path) -> GridEvidence | None:
    """The full corruption x severity grid a run stored (None: no complete grid)."""
    names = {p.stem for p in run_dir.glob("*.npz")}
    parsed = []
    for name in names:
        try:
            parsed.append(spec.parse_condition(name))
        except ValueError:
            continue
    parsed = [(c, s) for c, s in parsed if c is not None]
    severities = sorted({s for _, s in parsed})
    corruptions = [
        c for c in spec.CORRUPTIONS if severities and all((c, s) in parsed for s in severities)
    ]
    if not corruptions or spec.CLEAN not in names:
        return None
    samples = load_npz(run_dir / "samples.npz")
    keys = [spec.condition_key(c, s) for c in corruptions for s in severities]
    return GridEvidence.from_conditions(
        [str(x) for x in samples["ids"]],
        samples["answers"],
        samples["n_options"],
        load_npz(run_dir / f"{spec.CLEAN}.npz")["option_logits"],
        {k: load_npz(run_dir / f"{k}.npz")["option_logits"] for k in keys},
    )


def collect(
    run_dir: Path,
    thresholds_dir: Path,
    *,
    vsi_dir: Path | None = None,
    budget: float = DEFAULT_BUDGET,
) -> list[dict[str, Any]]:
    """One verdict record per gate (:meth:`benchc.gates.Outcome.to_dict`); cases without a
    snapshot, or whose snapshot is unusable, are ``unchecked`` records with the reason.
    ``vsi_dir``: the run folder of the VSI gates when they had a dataset of their own (the
    embedded VSI set); their gates share the run's false-alarm budget."""
    run_dir = Path(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    model = str(manifest.get("model_name", "model"))
    seed = int(manifest.get("settings", {}).get("seed", spec.DEFAULT_SEED))
    info = {
        "dataset_fingerprint": manifest.get("dataset_fingerprint"),
        "image_size": manifest.get("settings", {}).get("image_size"),
        "seed": seed,
    }
    cases: dict[str, Payload] = {}
    placeholder = lambda level: 0.0  # noqa: E731 - MDRs are recomputed by the check below
    try:
        grid = stored_grid(run_dir)
    except (StoreError, EvidenceError, KeyError, OSError) as exc:
        return [_unchecked("results", "grid", f"stored run {run_dir} is unreadable: {exc}")]
    common = dict(model=model, dataset=str(manifest.get("dataset_name")), seed=seed)
    if grid is not None:
        cases.update(grid_payloads(grid, info=info, z_for=placeholder, **common))
    vsi_run = Path(vsi_dir) if vsi_dir is not None else run_dir
    vsi_paths = sorted(vsi_run.glob("vsi-region-blur*.npz"), key=lambda p: len(p.name))
    if vsi_paths:
        from benchc.suite.payloads import build_payload

        vsi_manifest = json.loads((vsi_run / "manifest.json").read_text(encoding="utf-8"))
        vsi_info = {
            **info,
            "dataset_fingerprint": vsi_manifest.get("dataset_fingerprint"),
            "image_size": vsi_manifest.get("settings", {}).get("image_size"),
        }
        samples = load_npz(vsi_run / "samples.npz")
        ev = vsi_evidence(load_npz(vsi_paths[0]), [str(x) for x in samples["ids"]])
        vsi_common = {**common, "dataset": str(vsi_manifest.get("dataset_name"))}
        for f in figures("vsi", gated_only=True):
            cases[f"vsi:{f.name}"] = build_payload(
                ev, level="vsi", scope="vsi", names=[f.name], info=vsi_info, z_for=placeholder,
                **vsi_common,
            )  # fmt: skip
    z = ErrorBudget.for_payloads(budget, cases.values()).z
    folder = Path(thresholds_dir) / model_slug(model)
    records: list[dict[str, Any]] = []
    for key, current in cases.items():
        case = _case(key)
        path = folder / f"{case_name(case)}.json"
        if not path.is_file():
            records.append(_unchecked(case, key, f"no threshold snapshot {path}"))
            continue
        try:
            baseline = load_baseline(path)
        except (ValueError, KeyError, EvidenceError) as exc:
            records.append(_unchecked(case, key, str(exc)))
            continue
        mismatch = [k for k, v in current.info.items() if k in info and baseline.info.get(k) != v]
        if mismatch:
            why = f"snapshot recorded under other settings ({', '.join(mismatch)})"
            records.append(_unchecked(case, key, why))
            continue
        verdict = check(baseline, current, z_for=z, seed=seed)
        records.extend(o.to_dict(case) for o in verdict.outcomes)
    return records


def _unchecked(case: str, key: str, reason: str) -> dict[str, Any]:
    level, _, scope = key.partition(":")
    return {"case": case, "scope": scope or key, "level": level, "figure": None,
            "status": "unchecked", "reason": reason}  # fmt: skip


__all__ = ["collect", "stored_grid"]
