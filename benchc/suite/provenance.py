"""What a recorded baseline says about itself: ``baseline.manifest`` beside its snapshots.

Written at the end of ``--snapshot-update``: the model, dataset (with ``--dataset-args``) and VSI
set as given (so a gate
run's message can print the command that re-records the baseline from the released checkpoint),
the output-changing model arguments (checked before a gate run), and the environment
(:func:`benchc.provenance.environment`: a baseline recorded elsewhere gets one line), the
route its answers were scored by (``option_access``: :mod:`benchc.suite.route`), and the
files benchc wrote there (``files``: the snapshots and their evidence sidecars), the marker by
which a later re-record knows what it may delete (:func:`benchc.gates.sidecar.sweep_unreferenced`),
and the checkpoint's identity (``identity``: :func:`benchc.models.identity.checkpoint_identity`),
which a gate run compares first to say what changed since the baseline.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchc import provenance
from benchc.gates.baselines import is_baseline_folder, write_manifest
from benchc.suite.session import SuiteSession


def portable(path: str) -> str:
    """A local path relative to the working directory when under it (a committed baseline
    names ``fixtures/tiny-vlm``, not one machine's absolute path); a hub id unchanged."""
    p = Path(path)
    if not p.is_absolute():
        return path
    try:
        return str(p.relative_to(Path.cwd()))
    except ValueError:
        return path


def baseline_manifest(state: SuiteSession) -> dict[str, Any]:
    from benchc.models.identity import checkpoint_identity
    from benchc.suite.preflight import output_args

    cfg = state.cfg
    return {
        "name": state.baseline.name,
        "model": portable(cfg.model),
        "model_name": state.backend.name,
        "model_args": output_args(cfg),
        "dataset": portable(cfg.dataset),
        "dataset_args": dict(cfg.dataset_args),
        "vsi_dataset": portable(cfg.resolved_vsi_dataset()),
        "environment": provenance.environment(state.backend),
        "identity": checkpoint_identity(state.backend, portable(cfg.model)),
        # how its answers were scored: a gate run is checked against it before its first query
        "option_access": state.backend.capabilities.option_distribution,
    }


def baseline_files(folder: Path) -> list[str]:
    """What benchc wrote in a baseline folder: its snapshots (JSON carrying benchc's snapshot
    format) and the evidence sidecars they reference (or, when a snapshot is unreadable, the
    sidecars benchc is known to have written)."""
    from benchc.gates import sidecar
    from benchc.gates.baselines import snapshot_files

    snapshots = []
    for path in snapshot_files(folder):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "benchc_snapshot" in data:
            snapshots.append(path.name)
    refs = sidecar.referenced(folder)
    return sorted({*snapshots, *(sidecar.written(folder) if refs is None else refs)})


def record_baseline_manifest(state: SuiteSession) -> Path | None:
    """Write the baseline's manifest after a recording that wrote snapshots."""
    folder = state.baseline.folder
    if not is_baseline_folder(folder):
        return None
    return write_manifest(folder, {**baseline_manifest(state), "files": baseline_files(folder)})


__all__ = ["baseline_files", "baseline_manifest", "portable", "record_baseline_manifest"]
