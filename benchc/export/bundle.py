"""What every exporter sends: the verdict, the gated figures, the environment and the report.

Built from files a finished run already wrote (``report.json``, the run's manifest, the threshold
snapshots), so W&B, MLflow and the Hub all carry the same numbers as the report page, and an
export costs no forward pass.
"""

from __future__ import annotations

import json
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchc.provenance import installed_version

#: Packages whose versions change numbers (or the page): recorded with every export.
ENV_PACKAGES = (
    "benchc", "numpy", "scipy", "scikit-learn", "torch", "transformers", "pillow",
    "imagecorruptions-imaug",
)  # fmt: skip
#: Report files an export carries when present (``sample-log.jsonl``: ``--log-samples``).
REPORT_FILES = ("report.html", "report.json", "sample-log.jsonl")


def environment() -> dict[str, str]:
    """Python, platform and the versions of :data:`ENV_PACKAGES` (``absent`` when missing)."""
    env = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ENV_PACKAGES:
        env[name] = installed_version(name) or "absent"
    env["executable"] = sys.executable
    return env


def _verdict(doc: dict[str, Any], block: dict[str, Any]) -> str:
    """The run's one verdict: the state the gate engine wrote into the report
    (``overall``), else the engine's verdict of the report's gate records; ``none`` when the
    run produced none."""
    state = (doc.get("overall") or {}).get("state")
    if state:
        return str(state)
    items = block.get("items") or []
    if not block.get("available") or not items:
        return "none"
    from benchc.gates.engine import run_verdict

    return run_verdict(items).state


def _baseline_folder(doc: dict[str, Any], thresholds_dir: Path | None, model: Any) -> Path | None:
    """The baseline the run was gated against: the one its report names (``--baseline``), else
    the model's own in ``thresholds_dir`` (:func:`benchc.gates.baselines.locate`)."""
    from benchc.gates.baselines import locate

    named = ((doc.get("sides") or {}).get("baseline") or {}).get("source")
    if named and Path(named).is_dir():
        return locate(Path(named)).folder
    if thresholds_dir is None or not model:
        return None
    folder = locate(Path(thresholds_dir), str(model)).folder
    return folder if folder.is_dir() else None


def _num(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Bundle:
    """One run's export. ``metrics`` are flat ``name -> number`` (gated figures as
    ``gate/<scope>/<figure>/{current,baseline,change}``, Table II as ``table2/<name>``);
    ``params`` are strings (model, dataset, fingerprints, settings, environment)."""

    verdict: str
    counts: dict[str, int]
    gates: list[dict[str, Any]]
    metrics: dict[str, float]
    params: dict[str, str]
    environment: dict[str, str]
    report_dir: Path
    files: list[Path]
    snapshots_dir: Path | None = None
    title: str = ""
    model: str = ""
    dataset: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        """The JSON every exporter stores beside the report (``benchc-summary.json``)."""
        return {
            "schema": "benchc-export/1",
            "title": self.title,
            "verdict": self.verdict,
            "counts": self.counts,
            "gates": self.gates,
            "metrics": self.metrics,
            "params": self.params,
            "environment": self.environment,
            "provenance": self.extra.get("provenance"),
            "overall": self.extra.get("overall"),
            "changes": self.extra.get("changes"),
        }


def build(report_dir: Path, *, thresholds_dir: Path | None = None) -> Bundle:
    """The bundle of the report in ``report_dir`` (written by ``--report`` or
    ``benchc report``); ``thresholds_dir``: where the model's snapshots live."""
    report_dir = Path(report_dir)
    doc = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    block = doc.get("verdicts", {})
    counts = {str(k): int(v) for k, v in (block.get("counts") or {}).items()}
    gates, metrics = [], {}
    for item in block.get("items") or []:
        gate = {k: item.get(k) for k in
                ("scope", "figure", "status", "current", "baseline", "change", "tolerance",
                 "reason")}  # fmt: skip
        gates.append(gate)
        for part in ("current", "baseline", "change"):
            value = _num(item.get(part))
            if value is not None:
                metrics[f"gate/{item.get('scope')}/{item.get('figure')}/{part}"] = value
    series = (doc.get("series") or [{}])[0]
    for name, cell in (series.get("table2") or {}).items():
        value = _num(cell.get("value") if isinstance(cell, dict) else cell)
        if value is not None:
            metrics[f"table2/{name}"] = value
    env = environment()
    axes = doc.get("axes", {})
    params = {
        "model": str(series.get("model", "")),
        "model_fingerprint": str(series.get("model_fingerprint", "")),
        "dataset": str(series.get("dataset", "")),
        "dataset_fingerprint": str(series.get("dataset_fingerprint", "")),
        "samples": str(series.get("n", "")),
        "corruptions": ",".join(axes.get("corruptions", [])),
        "severities": ",".join(str(s) for s in axes.get("severities", [])),
        "report_schema": str(doc.get("schema", "")),
        **{f"env/{k}": v for k, v in env.items()},
        **_flat("provenance", doc.get("provenance") or {}),
    }
    snapshots = _baseline_folder(doc, thresholds_dir, params["model"])
    return Bundle(
        verdict=_verdict(doc, block),
        counts=counts,
        gates=gates,
        metrics=metrics,
        params=params,
        environment=env,
        report_dir=report_dir,
        files=[report_dir / f for f in REPORT_FILES if (report_dir / f).is_file()],
        snapshots_dir=snapshots,
        title=str(doc.get("title", "")),
        model=params["model"],
        dataset=params["dataset"],
        extra={
            "provenance": doc.get("provenance"),
            "overall": doc.get("overall"),
            "changes": doc.get("changes"),
        },
    )


def _flat(prefix: str, value: Any) -> dict[str, str]:
    """``report.json`` ``provenance`` as string params (``provenance/run/seed``); nulls left
    out."""
    if isinstance(value, dict):
        pairs = (_flat(f"{prefix}/{key}", sub) for key, sub in value.items())
        return {k: v for part in pairs for k, v in part.items()}
    return {} if value is None else {prefix: str(value)}
