"""``--wandb PROJECT``: the run as a W&B run (``pip install 'benchc[wandb]'``).

The verdict and the gated figures go to the run's summary, the settings and environment to its
config, and the report files to a ``benchc-report`` artifact. Where it goes is W&B's own
environment: ``WANDB_MODE=offline`` writes the run files under ``WANDB_DIR`` (sync them later
with ``wandb sync``), ``WANDB_ENTITY`` / ``WANDB_API_KEY`` as usual. The run's local files go
to ``WANDB_DIR`` when set, else to the folder the caller names (the report folder), never into
the working directory; an online run first checks that W&B's server (``WANDB_BASE_URL``)
accepts a connection within a few seconds (:mod:`benchc.export.reach`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from benchc.export import reach, require
from benchc.export.bundle import Bundle

#: Artifact type of the report files.
ARTIFACT_TYPE = "benchc-report"
#: W&B's default server (``WANDB_BASE_URL`` overrides it).
DEFAULT_BASE_URL = "https://api.wandb.ai"
#: ``WANDB_MODE`` values that send nothing.
LOCAL_MODES = ("offline", "disabled", "dryrun")


def export(bundle: Bundle, project: str, *, local_dir: Path | None = None) -> Path:
    """Log ``bundle`` as one W&B run of ``project``; returns the run's local folder, under
    ``WANDB_DIR``, else ``local_dir`` (else the report folder)."""
    wandb = require("wandb", "wandb")
    if os.environ.get("WANDB_MODE", "").strip().lower() not in LOCAL_MODES:
        reach.check("W&B", os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL)
    where = os.environ.get("WANDB_DIR") or str(local_dir or bundle.report_dir)
    Path(where).mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        dir=where,
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
