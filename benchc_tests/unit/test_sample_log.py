"""The per-sample log (``--log-samples``): written from the store, equal to the metrics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchc import spec
from benchc.export.session import after_run
from benchc.metrics.options import option_probs
from benchc.results.reader import group_runs, read_run
from benchc.results.sample_log import SAMPLE_LOG, SCHEMA, read_sample_log, write_sample_log
from benchc.results.store import load_npz
from benchc.suite.config import SuiteConfig
from benchc_tests.unit.report_runs import CORRUPTIONS, SEVERITIES, make_dataset, make_run


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("data") / "toy")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, dataset) -> Path:
    return make_run(tmp_path_factory.mktemp("results"), dataset)


def test_every_sample_every_condition_with_its_vsi(tmp_path, run_dir):
    path = write_sample_log(group_runs([run_dir]), tmp_path)
    assert path == tmp_path / SAMPLE_LOG
    lines = read_sample_log(path)
    run = read_run(run_dir)
    assert [r["id"] for r in lines] == list(run.ids)
    cells = [spec.CLEAN] + [spec.condition_key(c, s) for c in CORRUPTIONS for s in SEVERITIES]
    cells = [spec.CLEAN] + [k for k in cells[1:] if k in run.cells]  # canonical order
    vsi = load_npz(next(run_dir.glob("vsi-blur*.npz")))
    for i, rec in enumerate(lines):
        assert rec["schema"] == SCHEMA and rec["role"] == "grid"
        assert rec["answer"] == spec.LETTERS[int(run.answers[i])]
        assert list(rec["conditions"]) == cells
        assert rec["vsi"]["vsi"] == pytest.approx(float(vsi["vsi"][i]), rel=1e-12)
        assert rec["vsi"]["vsi_whole_top50"] == pytest.approx(float(vsi["vsi_whole_top50"][i]))
        assert rec["vsi"]["fallback"] is False
        for cell in cells:
            got = rec["conditions"][cell]
            assert len(got["probs"]) == rec["n_options"]
            assert sum(got["probs"]) == pytest.approx(1.0, abs=1e-5)
            assert got["correct"] == (got["prediction"] == rec["answer"])
    # every pair's answer and correctness are the metrics' own (benchc.metrics.compute_grid)
    grid = run.grid
    for i, rec in enumerate(lines):
        assert rec["conditions"]["clean"]["correct"] == bool(grid.correct_clean[i])
        for j, c in enumerate(run.corruptions):
            for m, s in enumerate(run.severities):
                got = rec["conditions"][spec.condition_key(c, s)]
                assert got["prediction"] == spec.LETTERS[int(grid.pred[i, j, m])]
                assert got["correct"] == bool(grid.correct[i, j, m])
    clean = option_probs(load_npz(run_dir / "clean.npz")["option_logits"], run.n_options)
    assert lines[3]["conditions"]["clean"]["probs"] == [
        round(float(v), 6) for v in clean[3, : run.n_options[3]]
    ]


def test_the_log_is_deterministic_and_refuses_another_schema(tmp_path, run_dir):
    a = write_sample_log(group_runs([run_dir]), tmp_path / "a").read_bytes()
    assert write_sample_log(group_runs([run_dir]), tmp_path / "b").read_bytes() == a
    line = json.loads(a.splitlines()[0])
    line["schema"] = "benchc-samples/0"
    (tmp_path / "old.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ValueError, match=r"old.jsonl:1: schema 'benchc-samples/0'"):
        read_sample_log(tmp_path / "old.jsonl")
    with pytest.raises(FileNotFoundError, match="not a benchc results folder"):
        write_sample_log([(tmp_path, None)], tmp_path / "c")


def test_a_vsi_run_of_its_own_dataset_adds_its_samples(tmp_path, dataset):
    other = make_dataset(tmp_path / "vsi-set", n=10, seed=9)
    grid = make_run(tmp_path / "res", dataset, vsi=False)
    vsi_run = make_run(tmp_path / "res", other, corruptions=(), severities=())
    lines = read_sample_log(write_sample_log([(grid, vsi_run)], tmp_path / "out"))
    roles = [r["role"] for r in lines]
    assert roles.count("grid") == 24 and roles.count("vsi") == 10
    assert all(r["vsi"] is None for r in lines if r["role"] == "grid")
    assert all(r["vsi"]["vsi"] is not None for r in lines if r["role"] == "vsi")


def test_written_from_the_store_without_loading_a_model(tmp_path, run_dir):
    """No forward pass: neither torch nor transformers nor any backend is even imported."""
    code = (
        "import sys; from pathlib import Path\n"
        "from benchc.results.reader import group_runs\n"
        "from benchc.results.sample_log import write_sample_log\n"
        f"write_sample_log(group_runs([Path({str(run_dir)!r})]), Path({str(tmp_path)!r}))\n"
        "loaded = [m for m in ('torch', 'transformers', 'benchc.models') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert len(read_sample_log(tmp_path / SAMPLE_LOG)) == 24


def test_log_samples_goes_next_to_the_report_else_into_the_run_folder(tmp_path, run_dir):
    pages: list[Path] = []
    cfg = SuiteConfig(log_samples=True, report=tmp_path / "rep", thresholds_dir=tmp_path)
    after_run(cfg, [run_dir], None, lambda *a: pages.append(a[-1]))
    assert (tmp_path / "rep" / SAMPLE_LOG).is_file() and not pages  # --report wrote the page
    cfg = SuiteConfig(log_samples=True, report=None, thresholds_dir=tmp_path)
    after_run(cfg, [run_dir], None, lambda *a: pages.append(a[-1]))
    assert (run_dir / SAMPLE_LOG).is_file() and not pages  # nothing to export: no page
    (run_dir / SAMPLE_LOG).unlink()
    assert after_run(SuiteConfig(report=tmp_path / "x"), [run_dir], None, None) == []
    assert not (tmp_path / "x").exists()
