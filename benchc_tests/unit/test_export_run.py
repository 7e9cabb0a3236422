"""The after-run flags through a real pytest session: a Hub-style parquet dataset with a column
mapping (``--dataset-args``), ``--log-samples`` and ``--push-to-hub`` (the upload call
captured), on the embedded tiny model, two cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchc.export import hub
from benchc.results.sample_log import SCHEMA
from benchc_tests.unit import test_plugin_runs as runs
from benchc_tests.unit.test_data_hub import MAPPING, _write_hub_folder

# The end-to-end runs' fixtures: the warm stack, the embedded model, the corruption cache.
_heavy_modules_loaded = runs._heavy_modules_loaded
model_dir = runs.model_dir
corruption_cache = runs.corruption_cache
project = runs.project

pytest_plugins = ["pytester"]


@pytest.mark.slow  # a suite run on a Hub-format dataset, its sample log and a push (~6 s)
def test_hub_dataset_log_samples_and_push_to_hub(
    project, model_dir, corruption_cache, tmp_path, monkeypatch
):
    from benchc.data.synthetic import generate

    rows = [s for s in generate(30, 7) if s.k == 4][:8]
    folder = _write_hub_folder(tmp_path / "org" / "mini", {"test": rows})
    uploads: list[dict] = []

    def upload(staged: Path, repo: str) -> str:
        uploads.append(
            {
                "repo": repo,
                "files": sorted(str(p.relative_to(staged)) for p in staged.rglob("*.json*")
                                if "snapshots" not in p.parts),
                "card": (staged / "README.md").read_text(),
            }
        )  # fmt: skip
        return "captured"

    monkeypatch.setattr(hub, "upload", upload)
    root = project.path
    args = runs._args(model_dir, Path(f"{folder}::test"), corruption_cache, root)
    report = root / "report"
    result = project.runpytest_inprocess(
        *args, f"--dataset-args={MAPPING}", "--log-samples", "--push-to-hub=org/reports",
        f"--report={report}", "-k", "test_cell", "--snapshot-update",
    )  # fmt: skip
    assert result.ret == pytest.ExitCode.OK  # the baseline recorded; the exports still run
    lines = [json.loads(t) for t in (report / "sample-log.jsonl").read_text().splitlines()]
    assert [r["id"] for r in lines] == [s.id for s in rows]
    assert all(r["schema"] == SCHEMA for r in lines)
    assert list(lines[0]["conditions"]) == ["clean", "fog-2", "pixelate-2"]
    doc = json.loads((report / "report.json").read_text())
    assert doc["series"][0]["n"] == 8
    (up,) = uploads
    assert up["repo"] == "org/reports"
    assert up["files"] == ["benchc-summary.json", "report.json", "sample-log.jsonl"]
    assert "# benchc report" in up["card"]
