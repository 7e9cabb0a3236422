"""Exporters end to end without network: W&B offline run files, an MLflow file store and the
Hub's staged folder and card, each read back (docs/guides/exporters.md).

W&B and MLflow need their extras (``pip install -e '.[wandb,mlflow]'``) and run under
``-m exporters`` (own ``.ci/run`` line); the Hub's folder and card need only huggingface_hub,
which transformers installs, and run by default.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchc.export import bundle as bundle_mod
from benchc.export import hub
from benchc.export.session import after_run
from benchc.suite.config import SuiteConfig
from benchc.suite.reports import write_report
from benchc_tests.unit.report_runs import make_dataset, make_run, verdict

VERDICTS = [
    verdict("fog-2", "ras", "fail"),
    verdict("fog-1", "ras", "pass"),
    verdict("model", "mcr", "pass", level="model"),
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    data = make_dataset(tmp_path_factory.mktemp("data") / "toy")
    return make_run(tmp_path_factory.mktemp("results"), data)


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory, run_dir) -> Path:
    out = tmp_path_factory.mktemp("report")
    write_report(run_dir, out, verdicts=VERDICTS, n_boot=20, images=False)
    return out


@pytest.fixture
def snapshots(tmp_path) -> Path:
    folder = tmp_path / "thresholds" / "toy-vlm"
    folder.mkdir(parents=True)
    (folder / "test_cell-fog-1.json").write_text('{"figure": "ras"}\n')
    return folder.parent


# -- the bundle every exporter sends -----------------------------------------------------------
def test_bundle_carries_verdict_gated_figures_environment_and_report(report_dir, snapshots):
    b = bundle_mod.build(report_dir, thresholds_dir=snapshots)
    doc = json.loads((report_dir / "report.json").read_text())
    assert b.verdict == "fail" and b.counts == {"fail": 1, "pass": 2}
    assert b.verdict == doc["overall"]["state"]  # the run's one verdict (issue 32)
    # provenance travels with every export: the run's dataset fingerprint and seed
    run = doc["provenance"]["run"]
    assert b.params["provenance/run/dataset_fingerprint"] == run["dataset_fingerprint"]
    assert b.params["provenance/run/seed"] == str(run["seed"])
    assert b.summary()["provenance"] == doc["provenance"]
    for item in doc["verdicts"]["items"]:
        key = f"gate/{item['scope']}/{item['figure']}"
        assert b.metrics[f"{key}/current"] == item["current"]
        assert b.metrics[f"{key}/change"] == item["change"]
    table2 = doc["series"][0]["table2"]
    assert b.metrics["table2/acc_clean"] == table2["acc_clean"]["value"]
    assert b.params["model"] == "toy-vlm" and b.params["dataset_fingerprint"]
    assert b.environment["benchc"] and b.params["env/numpy"] == b.environment["numpy"]
    assert [p.name for p in b.files] == ["report.html", "report.json"]
    assert b.snapshots_dir == snapshots / "toy-vlm"


def test_bundle_carries_the_named_baseline_a_candidate_was_gated_against(
    report_dir, snapshots, tmp_path
):
    # --baseline release-1: the snapshots are the release's, not the candidate's own name's
    named = snapshots / "release-1"
    named.mkdir()
    copy = tmp_path / "report"
    copy.mkdir()
    doc = json.loads((report_dir / "report.json").read_text())
    doc["sides"] = {"candidate": {"name": "toy-vlm", "source": "results/toy-vlm"},
                    "baseline": {"name": "release-1", "source": str(named)}}  # fmt: skip
    (copy / "report.json").write_text(json.dumps(doc))
    assert bundle_mod.build(copy, thresholds_dir=snapshots).snapshots_dir == named


def _gate(status: str, level: str = "model") -> dict:
    return {"case": "c", "scope": level, "level": level, "figure": "ras", "status": status}


def test_the_exported_verdict_is_the_gate_engines():
    # the state the engine wrote into the report wins; without one the engine decides the
    # report's records; a run without records has none
    assert bundle_mod._verdict({"overall": {"state": "crashed"}}, {}) == "crashed"
    block = {"available": True, "items": [_gate("fail"), _gate("pass")]}
    assert bundle_mod._verdict({}, block) == "fail"
    unchecked = {"available": True, "items": [_gate("unchecked"), _gate("pass", "cell")]}
    assert bundle_mod._verdict({}, unchecked) == "inconclusive"  # a model gate unchecked
    assert bundle_mod._verdict({}, {"available": False, "items": []}) == "none"


# -- the Hub: the staged folder, the card huggingface_hub parses, the one upload call -----------
def test_hub_folder_and_card(report_dir, snapshots, monkeypatch, tmp_path):
    from huggingface_hub import DatasetCard

    b = bundle_mod.build(report_dir, thresholds_dir=snapshots)
    folder = hub.stage(b, tmp_path / "stage")
    assert folder == tmp_path / "stage" and not (report_dir / "hub").exists()
    names = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert names == [
        "README.md", "benchc-summary.json", "report.html", "report.json",
        "snapshots/toy-vlm/test_cell-fog-1.json",
    ]  # fmt: skip
    assert (folder / "report.json").read_bytes() == (report_dir / "report.json").read_bytes()
    card = DatasetCard.load(folder / "README.md")
    meta = card.data.to_dict()
    assert "verdict-fail" in meta["tags"] and meta["benchc"]["verdict"] == "fail"
    assert meta["benchc"]["counts"] == {"fail": 1, "pass": 2}
    assert "**Verdict: fail**" in card.text and "| fog-2 | ras | fail |" in card.text
    summary = json.loads((folder / "benchc-summary.json").read_text())
    assert summary["verdict"] == "fail" and summary["metrics"] == b.metrics

    calls: list[tuple[str, dict]] = []

    class FakeApi:
        def create_repo(self, repo_id, **kw):
            calls.append(("create_repo", {"repo_id": repo_id, **kw}))

        def upload_folder(self, **kw):
            calls.append(("upload_folder", kw))
            return type("Info", (), {"commit_url": "https://hub.example/commit/1"})()

    monkeypatch.setattr("huggingface_hub.HfApi", FakeApi)
    reached: list[str] = []
    monkeypatch.setattr(hub.reach, "check", lambda service, url: reached.append(url))
    assert hub.upload(folder, "org/reports") == "https://hub.example/commit/1"
    assert calls == [
        ("create_repo", {"repo_id": "org/reports", "repo_type": "dataset", "private": True,
                         "exist_ok": True}),
        ("upload_folder", {"repo_id": "org/reports", "folder_path": str(folder),
                           "repo_type": "dataset", "commit_message": "benchc report"}),
    ]  # fmt: skip
    from huggingface_hub.constants import ENDPOINT

    assert reached == [ENDPOINT]  # the endpoint answered before the first call
    with pytest.raises(hub.ExportError, match="must be empty"):  # never stages over files
        hub.stage(b, folder)


def test_push_to_hub_after_a_run_without_report_dir(tmp_path, run_dir, snapshots, monkeypatch):
    """--push-to-hub alone: a temporary report (with --log-samples' log) is staged, uploaded."""
    seen: dict[str, object] = {}

    def upload(folder: Path, repo: str) -> str:
        seen["repo"] = repo
        seen["files"] = sorted(p.name for p in folder.iterdir())
        seen["verdict"] = json.loads((folder / "benchc-summary.json").read_text())["verdict"]
        return "uploaded"

    def page(cfg, dirs, verdicts, out):
        return write_report(dirs[0], out, verdicts=verdicts, n_boot=20, images=False)

    monkeypatch.setattr(hub, "upload", upload)
    cfg = SuiteConfig(push_to_hub="org/reports", log_samples=True, thresholds_dir=snapshots)
    lines = after_run(cfg, [run_dir], VERDICTS, page)
    assert seen == {
        "repo": "org/reports",
        "files": ["README.md", "benchc-summary.json", "report.html", "report.json",
                  "sample-log.jsonl", "snapshots"],
        "verdict": "fail",
    }  # fmt: skip
    assert lines[-1] == "exported to push_to_hub org/reports: uploaded"
    assert not (run_dir / "sample-log.jsonl").exists()  # the log went with the temporary report


def test_a_missing_extra_is_one_line_naming_it(report_dir, monkeypatch):
    import sys

    from benchc.export.session import run_exporters

    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
    (line,) = run_exporters(SuiteConfig(wandb="proj", report=report_dir), report_dir)
    assert line == (
        "export to wandb proj failed: ExportError: this exporter needs the optional "
        "dependency 'wandb': pip install 'benchc[wandb]'"
    )


# -- W&B offline, read back at W&B's public API -----------------------------------------------
class WandbSpy:
    """Calls through to the real ``wandb`` and keeps what benchc handed its public API: the
    ``wandb.init`` arguments, the summary updates and the logged artifact. (The offline run's
    only record is W&B's binary transaction log, readable only through its internal protobuf
    module; a finished run's summary reads empty.)"""

    def __init__(self, monkeypatch) -> None:
        import wandb

        self.init_kwargs: dict = {}
        self.summary: dict = {}
        self.artifacts: list = []
        real_init = wandb.init

        def init(*args, **kwargs):
            self.init_kwargs = kwargs
            run = real_init(*args, **kwargs)
            real_update = type(run.summary).update
            real_log = type(run).log_artifact

            def update(summary, data, *a, **k):
                self.summary.update(data)
                return real_update(summary, data, *a, **k)

            def log_artifact(r, artifact, *a, **k):
                self.artifacts.append(artifact)
                return real_log(r, artifact, *a, **k)

            monkeypatch.setattr(type(run.summary), "update", update)
            monkeypatch.setattr(type(run), "log_artifact", log_artifact)
            return run

        monkeypatch.setattr(wandb, "init", init)


@pytest.mark.exporters
def test_wandb_offline_run_files_read_back(report_dir, tmp_path, monkeypatch):
    from benchc.export import wandb as wb_export

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    spy = WandbSpy(monkeypatch)
    b = bundle_mod.build(report_dir)
    folder = wb_export.export(b, "benchc-test", local_dir=tmp_path / "elsewhere")
    assert folder.parent == tmp_path / "wandb" and folder.name.startswith("offline-run-")
    files = folder / "files"
    assert (files / "report.json").read_bytes() == (report_dir / "report.json").read_bytes()
    assert (files / "report.html").is_file()
    assert json.loads((files / "benchc-summary.json").read_text())["verdict"] == "fail"
    assert list(folder.glob("run-*.wandb"))  # W&B's own offline log, for `wandb sync`
    assert spy.init_kwargs["project"] == "benchc-test"
    config = spy.init_kwargs["config"]
    assert config["verdict"] == "fail" and config["model"] == "toy-vlm"
    assert config["env/benchc"] == b.environment["benchc"]
    summary = spy.summary
    assert summary["verdict"] == "fail" and summary["gates/fail"] == 1
    assert summary["gate/fog-2/ras/change"] == pytest.approx(-0.2)
    assert summary["table2/acc_clean"] == pytest.approx(b.metrics["table2/acc_clean"])
    (artifact,) = spy.artifacts
    assert artifact.type == "benchc-report"
    assert set(artifact.manifest.entries) == {
        "report.html",
        "report.json",
        "benchc-summary.json",
    }


@pytest.mark.exporters
def test_wandb_files_go_to_the_named_folder_never_the_working_directory(
    report_dir, tmp_path, monkeypatch
):
    from benchc.export import wandb as wb_export

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    folder = wb_export.export(bundle_mod.build(report_dir), "benchc-test", local_dir=tmp_path / "r")
    assert folder.parent == tmp_path / "r" / "wandb"
    assert list((tmp_path / "cwd").iterdir()) == []


# -- MLflow, a local file store read back ------------------------------------------------------
@pytest.mark.exporters
def test_mlflow_file_store_read_back(report_dir, tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    from benchc.export import mlflow as ml_export

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    b = bundle_mod.build(report_dir)
    run_id = ml_export.export(b, "benchc-test", tracking_uri=uri)
    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["benchc.verdict"] == "fail" and run.data.tags["benchc.gates.fail"] == "1"
    assert run.data.metrics == pytest.approx(b.metrics)
    assert run.data.params["model"] == "toy-vlm"
    assert run.data.params["env/python"] == b.environment["python"]
    arts = {a.path for a in client.list_artifacts(run_id, "report")}
    assert arts == {"report/report.html", "report/report.json", "report/benchc-summary.json"}
    local = client.download_artifacts(run_id, "report/report.json", str(tmp_path / "dl"))
    assert Path(local).read_bytes() == (report_dir / "report.json").read_bytes()
    # a second export lands in the same experiment
    ml_export.export(b, "benchc-test", tracking_uri=uri)
    exp = client.get_experiment_by_name("benchc-test")
    assert len(client.search_runs([exp.experiment_id])) == 2
