"""What a recorded baseline says about itself: ``baseline.manifest`` beside its snapshots.

Written at the end of ``--snapshot-update``: the model, dataset and VSI set as given (so a gate
run's message can print the command that re-records the baseline from the released checkpoint),
the output-changing model arguments (checked before a gate run), and the environment
(:func:`benchc.provenance.environment`: a baseline recorded elsewhere gets one line).
"""

from __future__ import annotations

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
    from benchc.suite.preflight import output_args

    cfg = state.cfg
    return {
        "name": state.baseline.name,
        "model": portable(cfg.model),
        "model_name": state.backend.name,
        "model_args": output_args(cfg),
        "dataset": portable(cfg.dataset),
        "vsi_dataset": portable(cfg.resolved_vsi_dataset()),
        "environment": provenance.environment(state.backend),
    }


def record_baseline_manifest(state: SuiteSession) -> Path | None:
    """Write the baseline's manifest after a recording that wrote snapshots."""
    folder = state.baseline.folder
    if not is_baseline_folder(folder):
        return None
    return write_manifest(folder, baseline_manifest(state))


__all__ = ["baseline_manifest", "portable", "record_baseline_manifest"]
