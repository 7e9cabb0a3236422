"""Hostile-but-ordinary inputs (issue 31): benchc deletes or rewrites only what it wrote, and
every path a user takes ends in a result or one clear line.

Each case asserts the one line it prints and that no byte of the user's other files changed
(every file hashed before and after). Runs use the embedded tiny model on a handful of samples,
one corruption at one severity, in process.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import time
from pathlib import Path

import pytest

from benchc.gates.states import EXIT_INFRA

# pytester's in-process runs drop modules first imported inside them; torch cannot be imported
# twice: load the stack out here (as test_hardening_runs does).
from benchc_tests.unit.test_bad_inputs import write_jsonl

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "fixtures" / "tiny-vlm"


from benchc_tests.unit.suite_project import _heavy_modules_loaded  # noqa: E402, F401  (autouse)


def hashes(*roots: Path) -> dict[str, str]:
    """sha256 of every file under ``roots`` (the user's files), by path."""
    out = {}
    for root in roots:
        files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
        for p in files:
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _args(root: Path, data: Path, *extra: str) -> list[str]:
    return [
        "suite",
        f"--model={MODEL}",
        f"--dataset={data}",
        "--corruptions=fog",
        "--severities=1",
        f"--results-dir={root / 'results'}",
        f"--cache-dir={root / 'cache'}",
        f"--thresholds-dir={root / 'thresholds'}",
        "-p",
        "no:randomly",
        *extra,
    ]


def _usage_error(result: pytest.RunResult) -> str:
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "Traceback" not in err + result.stdout.str()
    lines = [line for line in err.splitlines() if line.startswith("ERROR: benchc:")]
    assert len(lines) == 1, err
    return lines[0]


def _error_lines(result: pytest.RunResult) -> list[str]:
    """The summary's ``ERROR: benchc:`` lines; the run itself never printed a traceback."""
    out = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    return [ln for ln in result.stdout.str().splitlines() if ln.startswith("ERROR: benchc:")]


# -- the dataset every run here uses: six testbed samples, in every format -----------------------
@pytest.fixture(scope="module")
def formats(tmp_path_factory) -> dict[str, Path]:
    """The same six samples as JSONL, TSV (two file names), a ``.parquet`` file written by
    ``datasets`` and one pandas wrote from the TSV, a parquet folder and a ``save_to_disk``
    folder."""
    datasets = pytest.importorskip("datasets")
    pd = pytest.importorskip("pandas")
    from benchc.data import load_dataset, save_jsonl
    from benchc.data.hf import save_hf
    from benchc.data.tsv import save_tsv

    root = tmp_path_factory.mktemp("formats")
    samples = list(load_dataset(ROOT / "fixtures" / "testbed").samples[:6])
    save_jsonl(samples, root / "jsonl")
    save_tsv(samples, root / "photos.tsv")
    shutil.copy(root / "photos.tsv", root / "robustness.tsv")
    save_hf(samples, root / "disk")
    table = datasets.load_from_disk(str(root / "disk"))
    table.to_parquet(str(root / "one.parquet"))
    (root / "hub" / "data").mkdir(parents=True)
    table.to_parquet(str(root / "hub" / "data" / "test-00000-of-00001.parquet"))
    tsv = pd.read_csv(root / "photos.tsv", sep="\t", dtype=str, keep_default_na=False)
    tsv.to_parquet(root / "from-tsv.parquet")
    renamed = tsv.rename(columns={"index": "qid", "question": "prompt", "answer": "label"})
    renamed.to_parquet(root / "renamed.parquet")
    names = ["jsonl", "photos.tsv", "robustness.tsv", "disk", "one.parquet", "hub",
             "from-tsv.parquet", "renamed.parquet"]  # fmt: skip
    return {name: root / name for name in names}


def test_a_dataset_is_its_samples_not_its_file_name_or_format(formats):
    from benchc.data import load_dataset
    from benchc.data.hf import parse_columns

    mapping = parse_columns("id=qid,question=prompt,answer=label")
    prints = {
        name: load_dataset(path, columns=mapping if name == "renamed.parquet" else None)
        for name, path in formats.items()
    }
    assert len({d.fingerprint for d in prints.values()}) == 1, {
        n: d.fingerprint for n, d in prints.items()
    }
    assert prints["one.parquet"].ids == prints["jsonl"].ids  # a single .parquet file loads
    # provenance stays on the samples (a TSV's file stem), outside the fingerprint
    assert prints["photos.tsv"][0].meta["source"] == "photos"


def test_dataset_args_on_a_format_without_columns_is_one_line_naming_the_formats(formats):
    from benchc.data import load_dataset

    with pytest.raises(ValueError, match=r"Hugging Face datasets and parquet files only"):
        load_dataset(formats["photos.tsv"], columns={"id": "qid"})


def test_a_baseline_recorded_from_a_tsv_gates_the_same_samples_as_parquet(project, formats):
    before = hashes(formats["photos.tsv"].parent)
    record = project.runpytest_inprocess(
        *_args(project.path, formats["photos.tsv"], "--snapshot-update", "-k", "not vsi")
    )
    assert record.ret == 0, record.stdout.str()
    args = _args(project.path, formats["renamed.parquet"], "-k", "not vsi",
                 "--dataset-args=id=qid,question=prompt,answer=label")  # fmt: skip
    gate = project.runpytest_inprocess(*args)
    assert gate.ret == 0, gate.stdout.str()
    assert "cannot be gated" not in gate.stdout.str() + gate.stderr.str()
    assert hashes(formats["photos.tsv"].parent) == before


def test_a_baseline_an_older_benchc_recorded_on_the_same_samples_is_named_as_such(
    project, formats, no_forward
):
    from benchc.data import load_dataset
    from benchc.data.fingerprint import fingerprint

    # the rule before benchc-data-2, checked against what this checkout's baseline was
    # recorded with before its migration (git history of thresholds/tiny-vlm)
    testbed = load_dataset(ROOT / "fixtures" / "testbed")
    assert fingerprint(testbed.samples, legacy=True) == "f86af56f96d30804"
    tsv = formats["photos.tsv"]
    project.runpytest_inprocess(*_args(project.path, tsv, "--snapshot-update", "-k", "not vsi"))
    old = fingerprint(load_dataset(tsv).samples, legacy=True)
    new = load_dataset(tsv).fingerprint
    for snap in (project.path / "thresholds" / "tiny-vlm").glob("*.json"):
        snap.write_text(snap.read_text().replace(new, old))  # as an older benchc recorded it
    before = hashes(project.path / "thresholds", tsv)
    result = project.runpytest_inprocess(*_args(project.path, tsv, "-k", "not vsi"))
    line, err = _usage_error(result), result.stderr.str()
    assert "cannot be gated against baseline tiny-vlm" in line
    assert "recorded on these same samples by an older benchc" in err
    assert f"set dataset_fingerprint {old} to {new} in its snapshots" in err
    assert hashes(project.path / "thresholds", tsv) == before


def test_a_printed_fix_keeps_dataset_args(project, formats, no_forward):
    """Gated against a baseline of other samples: every command the refusal prints carries the
    column mapping, so run verbatim it does not fail on the columns."""
    other = write_jsonl(project.path / "src")
    project.runpytest_inprocess(
        *_args(project.path, other, "--snapshot-update", "--baseline=other", "-k", "not vsi")
    )
    args = _args(project.path, formats["renamed.parquet"], "--baseline=other", "-k", "not vsi",
                 "--dataset-args=id=qid,question=prompt,answer=label")  # fmt: skip
    result = project.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "fingerprint" in err and "Traceback" not in err
    commands = [ln.strip() for ln in err.splitlines() if ln.strip().startswith("pytest ")]
    assert len(commands) == 2, err
    # the fix that re-records carries the mapping; the one that returns to the recorded JSONL
    # carries the baseline's own (none), so neither fails on the columns when run verbatim
    assert "--dataset-args=id=qid,question=prompt,answer=label" in commands[1], commands
    assert "--dataset-args" not in commands[0] and "--dataset=src/ds " in commands[0], commands


# -- the baseline sweep: only the recorded folder, only benchc's files -------------------------
def test_recording_by_path_deletes_nothing_benchc_did_not_write(project):
    data = write_jsonl(project.path / "src")
    team = project.path / "team"
    (team / "other" / "arrays").mkdir(parents=True)
    (team / "other" / "arrays" / "keep.npz").write_bytes(b"a colleague's arrays")
    (team / "other" / "a.json").write_text('{"evidence": {"file": "arrays/gone.npz"}}')
    (team / "list" / "arrays").mkdir(parents=True)
    (team / "list" / "a.json").write_text("[1, 2, 3]")  # JSON that is not an object
    (team / "list" / "arrays" / "x.npz").write_bytes(b"x")
    (team / "mine" / "arrays").mkdir(parents=True)
    foreign = team / "mine" / "arrays" / ("0" * 20 + ".npz")  # benchc's shape, not its file
    foreign.write_bytes(b"not benchc's")
    (team / "mine" / "notes.json").write_text('["mine"]')
    before = hashes(team, data)
    result = project.runpytest_inprocess(
        *_args(project.path, data, f"--baseline={team / 'mine'}", "--snapshot-update")
    )
    assert result.ret == 0, result.stdout.str()
    assert _error_lines(result) == []
    after = hashes(team, data)
    assert {k: after.get(k) for k in before} == before  # every file of the user's is intact
    manifest = json.loads((team / "mine" / "baseline.manifest").read_text())
    written = set(manifest["files"])
    assert any(f.startswith("arrays/") for f in written)
    assert "arrays/" + foreign.name not in written and "notes.json" not in written
    for rel in written:  # what the manifest lists is what benchc wrote there
        assert (team / "mine" / rel).is_file()


# -- output folders: checked before anything runs, and a late failure costs nothing -----------
@pytest.mark.parametrize(
    ("option", "rel", "update"),
    [
        ("--report", "afile/rep", False),
        ("--results-dir", "afile/res", False),
        ("--cache-dir", "afile", False),
        ("--thresholds-dir", "afile/th", True),
        ("--baseline", "afile/base", True),
    ],
)
def test_an_unusable_output_folder_is_one_usage_error_before_any_forward(
    project, no_forward, option, rel, update
):
    data = write_jsonl(project.path / "src")
    blocker = project.path / "afile"
    blocker.write_text("a file of the user's")
    before = hashes(blocker, data)
    extra = [f"{option}={project.path / rel}"] + (["--snapshot-update"] if update else [])
    line = _usage_error(project.runpytest_inprocess(*_args(project.path, data, *extra)))
    assert line.startswith(f"ERROR: benchc: {option} {project.path / rel}: cannot write there")
    assert f"{blocker} is a file" in line, line
    assert hashes(blocker, data) == before
    assert not (project.path / "results").exists()  # nothing was computed


def test_a_report_folder_holding_files_benchc_did_not_write_is_refused_up_front(
    project, no_forward, capsys
):
    data = write_jsonl(project.path / "src")
    mine = project.path / "docs"
    mine.mkdir()
    (mine / "report.json").write_text('{"quarterly": "numbers"}')
    (mine / "sample-log.jsonl").write_text('{"my": "log"}\n')
    before = hashes(mine, data)
    args = _args(project.path, data, f"--report={mine}", "--log-samples")
    line = _usage_error(project.runpytest_inprocess(*args))
    assert line == (
        f"ERROR: benchc: --report {mine}: {mine / 'report.json'} exists and benchc did not "
        "write it (it would be overwritten); name a new folder or one benchc wrote"
    )
    from benchc.cli import main

    with pytest.raises(SystemExit) as usage:  # benchc report --out: the same rule
        main(["report", str(project.path), "--out", str(mine)])
    assert usage.value.code == 4  # the verdict table's usage code
    err = capsys.readouterr().err
    assert f"--out {mine}: cannot write there: {mine / 'report.json'} exists and benchc" in err
    assert hashes(mine, data) == before


@pytest.mark.slow  # suite runs, then benchc report rebuilding the page (~6 s)
def test_a_report_that_cannot_be_written_keeps_the_results_the_verdict_and_the_exit_code(
    project, capsys
):
    data = write_jsonl(project.path / "src")
    report = project.path / "rep"
    (report / "report.html").mkdir(parents=True)  # in the way of the page
    (report / "report.html" / "mine.txt").write_text("the user's")
    before = hashes(report, data)
    args = _args(project.path, data, "-k", "not vsi")
    # a cell, a family, the 15 model-level figures
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=17)
    passing = project.runpytest_inprocess(*args, f"--report={report}")
    assert passing.ret == 0  # every case passed: the report's failure does not change that
    (line,) = _error_lines(passing)
    assert line.startswith(f"ERROR: benchc: could not write the report (--report) in {report} ")
    # a failing case (a snapshot made unusable by hand), gated with the same unwritable report
    ras = project.path / "thresholds" / "tiny-vlm" / "model-ras.json"
    ras.write_text(ras.read_text().replace('"ras:higher:floor=0.01"', '"ras:higher:floor=nan"'))
    result = project.runpytest_inprocess(*args, f"--report={report}")
    # the run's own exit code stands: the baseline cannot check that case (the usage state)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    (line,) = _error_lines(result)
    assert line.startswith(f"ERROR: benchc: could not write the report (--report) in {report} ")
    assert "IsADirectoryError" in line and "benchc report " in line  # how to rebuild it
    out = result.stdout.str()
    assert "results: " in out and "baseline: " in out and "gates: " in out  # the summary
    assert "FAILED suite/test_model.py::test_model[ras]" in out
    assert f"report: {report}" not in out
    assert hashes(report, data) == {
        **before,
        **{k: v for k, v in hashes(report).items() if k not in before and "report.html" not in k},
    }
    assert not list(report.glob(".*.tmp"))  # no half-written file left behind
    # the report can be rebuilt later from the stored results
    from benchc.cli import main

    runs = [d for d in (project.path / "results").glob("*/*") if d.is_dir()]
    later = ["--out", str(project.path / "later"), "--no-images"]
    assert main(["report", *map(str, runs), *later]) in (0, 1)
    assert (project.path / "later" / "report.html").is_file()
    capsys.readouterr()
    # benchc report itself: the same unwritable folder is one line that blames the page, not
    # the store, and a file in the way of --out is a usage error before any work
    assert main(["report", *map(str, runs), "--out", str(report), "--no-images"]) == 8  # infra
    (err,) = capsys.readouterr().err.splitlines()
    assert f"could not build or write the page in {report} (IsADirectoryError" in err
    assert err.endswith("the stored results are intact")
    with pytest.raises(SystemExit) as usage:
        main(["report", *map(str, runs), "--out", str(report / "report.html" / "mine.txt")])
    assert usage.value.code == 4  # the verdict table's usage code
    assert "--out" in capsys.readouterr().err
    assert hashes(report / "report.html", data) == before


# -- exporters: staged in a temporary folder, one line when the service is unreachable --------
def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_push_to_hub_never_touches_the_report_folder_and_an_unreachable_hub_is_one_line(
    project, monkeypatch, capfd
):
    import huggingface_hub.constants

    endpoint = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", endpoint)
    data = write_jsonl(project.path / "src")
    report = project.path / "rep"
    (report / "hub").mkdir(parents=True)
    (report / "hub" / "mine.txt").write_text("the user's")
    project.runpytest_inprocess(*_args(project.path, data, "--snapshot-update", "-k", "not vsi"))
    before = hashes(report / "hub", data)
    started = time.monotonic()
    args = _args(project.path, data, f"--report={report}", "--push-to-hub=org/reports",
                 "-k", "not vsi")  # fmt: skip
    result = project.runpytest_inprocess(*args)
    assert result.ret == 0, result.stdout.str()
    assert time.monotonic() - started < 120
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if "export to push_to_hub" in ln]
    assert lines == [
        f"benchc: export to push_to_hub org/reports failed: ExportError: the Hugging Face Hub "
        f"at {endpoint} is unreachable (Connection refused); nothing was sent (set "
        "BENCHC_EXPORT_TIMEOUT to wait longer than 5 s)"
    ], err
    assert hashes(report / "hub", data) == before
    assert (report / "report.html").is_file()


def test_a_service_that_does_not_answer_is_given_the_timeout_and_no_more(monkeypatch):
    from benchc.export import ExportError, reach

    def silent(address, timeout):  # a host that never answers within the wait
        time.sleep(timeout + 1)
        raise TimeoutError("timed out")

    monkeypatch.setattr(reach.socket, "create_connection", silent)
    monkeypatch.setenv(reach.TIMEOUT_ENV, "0.3")
    started = time.monotonic()
    with pytest.raises(ExportError) as info:
        reach.check("the MLflow tracking server", "http://mlflow.internal:5000")
    assert time.monotonic() - started < 2
    assert str(info.value) == (
        "the MLflow tracking server at http://mlflow.internal:5000 is unreachable (no answer "
        "within 0.3 s); nothing was sent (set BENCHC_EXPORT_TIMEOUT to wait longer than 0.3 s)"
    )
    reach.check("a local store", "file:///tmp/mlruns")  # not a network service: not checked
    monkeypatch.setenv(reach.TIMEOUT_ENV, "soon")
    with pytest.raises(ExportError, match=r"BENCHC_EXPORT_TIMEOUT='soon' is not a positive"):
        reach.check("W&B", "https://api.wandb.ai")


def test_wandb_and_mlflow_check_their_server_before_their_library_is_called(monkeypatch, tmp_path):
    """With the extra installed, the exporter calls ``reach.check`` with the service's URL
    before its library's first network call (W&B online mode, an http MLflow server)."""
    import sys
    import types

    from benchc.export import ExportError, reach
    from benchc.export import mlflow as ml_export
    from benchc.export import wandb as wb_export

    def refuse(service, url):
        raise ExportError(f"{service} at {url} is unreachable")

    monkeypatch.setattr(reach, "check", refuse)
    called = []
    server = "http://mlflow.internal:5000"
    fake = types.SimpleNamespace(init=lambda **kw: called.append(kw),
                                 get_tracking_uri=lambda: server)  # fmt: skip
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    monkeypatch.setitem(sys.modules, "mlflow.entities", types.SimpleNamespace(
        Metric=None, Param=None, RunTag=None))  # fmt: skip
    monkeypatch.setitem(sys.modules, "mlflow.tracking", types.SimpleNamespace(MlflowClient=None))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.internal")
    bundle = types.SimpleNamespace(report_dir=tmp_path)
    with pytest.raises(ExportError, match=r"W&B at https://wandb\.internal is unreachable"):
        wb_export.export(bundle, "proj")  # type: ignore[arg-type]
    with pytest.raises(
        ExportError, match=r"MLflow tracking server at http://mlflow\.internal:5000"
    ):
        ml_export.export(bundle, "exp")  # type: ignore[arg-type]
    assert called == [] and list(tmp_path.iterdir()) == []


# -- a subset --snapshot-update never rewrites a larger baseline ------------------------------
def test_a_subset_update_never_rewrites_a_larger_baseline(project):
    data = write_jsonl(project.path / "src")
    full = _args(project.path, data, "--snapshot-update", "-k", "not vsi")
    full[full.index("--severities=1")] = "--severities=1,2"
    project.runpytest_inprocess(*full).assert_outcomes(passed=18)  # 2 cells, 1 family, 15 model
    folder = project.path / "thresholds" / "tiny-vlm"
    ras = folder / "model-ras.json"
    snapshot = json.loads(ras.read_text())
    assert len(snapshot["info"]["conditions"]) == 2
    # a rule edited by hand into something unreadable: never reset silently
    snapshot["rules"] = ["ras:higher:floor=nan"]
    ras.write_text(json.dumps(snapshot, indent=1) + "\n")
    ran = str(folder / "cell-fog-1.json")  # the one case the subset run records

    def untouched() -> dict[str, str]:
        return {k: v for k, v in hashes(folder, data).items() if k != ran}

    before = untouched()
    subset = _args(project.path, data, "--snapshot-update", "-k", "not vsi")
    result = project.runpytest_inprocess(*subset)
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # the baseline cannot record this case
    out = result.stdout.str()
    assert f"{ras}: a gate rule cannot be read (gate rule ras: floor must be finite" in out
    assert "nothing was recorded for this case" in out and "During handling" not in out
    assert untouched() == before  # every other figure and rule of the 2-cell baseline stands
    # evidence gone: the snapshots cannot be loaded, and a subset run still keeps them
    snapshot["rules"] = ["ras:higher:floor=0.01"]
    ras.write_text(json.dumps(snapshot, indent=1) + "\n")
    (folder / snapshot["evidence"]["file"]).unlink()
    before = untouched()
    result = project.runpytest_inprocess(*subset)
    assert result.ret == 0, result.stdout.str()
    assert "(it is unusable: record all its cells)" in result.stdout.str()
    assert untouched() == before
    assert json.loads(ras.read_text())["info"]["conditions"] == ["fog-1", "fog-2"]


# -- a device that refuses writes while computing: one line, the run stops --------------------
def test_a_refused_write_is_one_line_naming_the_folders(tmp_path):
    from benchc.suite.config import SuiteConfig
    from benchc.suite.outputs import device_problem

    cfg = SuiteConfig(results_dir=tmp_path / "res", cache_dir=tmp_path / "cache")
    try:
        with open("/dev/full", "wb") as full:  # a real device that is always full
            full.write(b"x" * 65536)
            full.flush()
        pytest.skip("no /dev/full here")  # pragma: no cover (not Linux)
    except OSError as exc:
        refused = exc
    line = device_problem(cfg, refused)
    assert line == (
        f"cannot write the results (No space left on device): free space in --results-dir "
        f"{tmp_path / 'res'} or --cache-dir {tmp_path / 'cache'} or name another folder, then "
        "rerun; what was stored so far is kept and reused"
    )
    named = OSError(refused.errno, refused.strerror, str(tmp_path / "res" / "m" / "x.npz"))
    assert f"free space in --results-dir {tmp_path / 'res'} or" in device_problem(cfg, named)
    assert device_problem(cfg, FileNotFoundError(2, "gone")) is None  # not the device's


def test_a_full_results_disk_stops_the_run_with_one_line(project, tmp_path):
    """--results-dir on a 16 KiB tmpfs: the first refused write ends the run with one line
    (not a traceback per case). Mounting needs root; elsewhere there is no full disk to use."""
    import subprocess

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(disk)],
                             capture_output=True, check=False)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        data = write_jsonl(project.path / "src")
        before = hashes(data)
        args = _args(project.path, data, f"--results-dir={disk / 'res'}", "--snapshot-update")
        result = project.runpytest_inprocess(*args)
        assert result.ret == EXIT_INFRA  # a fault outside the model, never a regression's code
        out = result.stdout.str() + result.stderr.str()
        assert "Traceback" not in out and "FAILED" not in out
        lines = [ln for ln in out.splitlines() if "No space left on device" in ln]
        assert len(lines) == 1 and f"free space in --results-dir {disk / 'res'}" in lines[0]
        assert hashes(data) == before
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- benchc select --overwrite: only the files a selection wrote ------------------------------
def test_select_overwrite_removes_only_what_a_selection_wrote(tmp_path):
    from benchc.select.cli import _prepare_out

    out = tmp_path / "testbed"
    shutil.copytree(ROOT / "fixtures" / "testbed", out)  # a selection benchc wrote
    (out / "NOTES.md").write_text("the user's notes")
    (out / "images" / "extra.png").write_bytes(b"the user's image")
    keep = hashes(out / "NOTES.md", out / "images" / "extra.png")
    _prepare_out(out, overwrite=True)
    assert hashes(out) == keep  # the selection's files went, the user's stayed
    # a dataset folder of the same shape that no selection wrote is refused, untouched
    mine = tmp_path / "mine"
    write_jsonl(mine)
    before = hashes(mine)
    with pytest.raises(SystemExit) as refused:
        _prepare_out(mine / "ds", overwrite=True)
    assert str(refused.value) == (
        f"--out {mine / 'ds'} exists and does not hold a selection benchc wrote (no "
        "samples.jsonl with its selection_report.json); choose another folder"
    )
    assert hashes(mine) == before
