"""``--mlflow EXPERIMENT``: the run as an MLflow run (``pip install 'benchc[mlflow]'``).

Metrics are the gated figures and Table II, params the settings and environment, tags the
verdict, artifacts the report files under ``report/``. The tracking server is MLflow's own
setting, ``MLFLOW_TRACKING_URI`` (a server, ``sqlite:///mlflow.db`` with the full ``mlflow``
package, or a local ``file:`` store, which MLflow 3 accepts with
``MLFLOW_ALLOW_FILE_STORE=true``). A server that does not accept a connection within a few
seconds (:mod:`benchc.export.reach`) is one line, before MLflow's own retries could stall the
run for minutes.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from benchc.export import reach, require
from benchc.export.bundle import Bundle

#: MLflow caps a param value at this many characters.
PARAM_MAX = 500


def export(
    bundle: Bundle,
    experiment: str,
    *,
    tracking_uri: str | None = None,
    local_dir: Path | None = None,
) -> str:
    """Log ``bundle`` as one run of ``experiment``; returns the run id (``local_dir``: unused,
    the server keeps the run)."""
    mlflow = require("mlflow", "mlflow")
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    uri = tracking_uri or mlflow.get_tracking_uri()
    reach.check("the MLflow tracking server", str(uri))
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    exp_id = found.experiment_id if found is not None else client.create_experiment(experiment)
    run = client.create_run(
        exp_id,
        run_name=f"{bundle.model} on {bundle.dataset}",
        tags={"benchc.verdict": bundle.verdict, "benchc.title": bundle.title},
    )
    run_id = run.info.run_id
    status, now_ms = "FAILED", int(time.time() * 1000)
    try:
        client.log_batch(
            run_id,
            metrics=[Metric(k, v, now_ms, 0) for k, v in sorted(bundle.metrics.items())],
            params=[Param(k, str(v)[:PARAM_MAX]) for k, v in sorted(bundle.params.items())],
            tags=[RunTag(f"benchc.gates.{k}", str(v)) for k, v in sorted(bundle.counts.items())],
        )
        with tempfile.TemporaryDirectory() as tmp:
            summary = Path(tmp) / "benchc-summary.json"
            summary.write_text(json.dumps(bundle.summary(), indent=1, sort_keys=True))
            for path in [*bundle.files, summary]:
                client.log_artifact(run_id, str(path), artifact_path="report")
        status = "FINISHED"
    finally:
        client.set_terminated(run_id, status=status)
    return run_id
