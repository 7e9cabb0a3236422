"""``--wandb PROJECT``: the run as a W&B run (``pip install 'benchc[wandb]'``).

The verdict and the gated figures go to the run's summary, the settings and environment to its
config, and the report files to a ``benchc-report`` artifact. Where it goes is W&B's own
environment: ``WANDB_MODE=offline`` writes the run files under ``WANDB_DIR`` (sync them later
with ``wandb sync``), ``WANDB_ENTITY`` / ``WANDB_API_KEY`` as usual.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchc.export import require
from benchc.export.bundle import Bundle

#: Artifact type of the report files.
ARTIFACT_TYPE = "benchc-report"


def export(bundle: Bundle, project: str) -> Path:
    """Log ``bundle`` as one W&B run of ``project``; returns the run's local folder."""
    wandb = require("wandb", "wandb")
    run = wandb.init(
        project=project,
        name=f"{bundle.model} on {bundle.dataset}",
        job_type="benchc",
        tags=[f"verdict:{bundle.verdict}"],
        config={**bundle.params, "verdict": bundle.verdict},
        settings=wandb.Settings(silent=True, save_code=False),
        reinit="create_new",
    )
    try:
        run.summary.update(
            {"verdict": bundle.verdict, **{f"gates/{k}": v for k, v in bundle.counts.items()},
             **bundle.metrics}
        )  # fmt: skip
        # copies in the run's own folder (uploaded at finish, or by ``wandb sync``): the report
        # folder may be a temporary one that is gone before an offline run is synced
        files = Path(run.dir)
        for path in bundle.files:
            shutil.copy2(path, files / path.name)
        (files / "benchc-summary.json").write_text(
            json.dumps(bundle.summary(), indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )
        artifact = wandb.Artifact(f"benchc-report-{run.id}", type=ARTIFACT_TYPE)
        for path in [*bundle.files, files / "benchc-summary.json"]:
            artifact.add_file(str(files / path.name), name=path.name)
        run.log_artifact(artifact)
        return files.parent
    finally:
        run.finish()
