"""Issue 11 end to end through the suite: bad data and bad option values are one usage error
before any case (and before any model forward), ``--lenient`` runs and counts, ``-k``/``-m``
select whole names, and a damaged store is repaired by the next run while ``benchc report``
says what is wrong in one line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

# pytester's in-process runs drop modules first imported inside them; torch cannot be imported
# twice: load the stack out here (as test_plugin_runs does).
import benchc.corruptions
import benchc.metrics.vsi
import benchc.models.hf
import benchc.suite.session
from benchc.results import ResultStore, RunKey
from benchc_tests.unit.test_bad_inputs import outside_file, png, set_field, write_jsonl

pytest_plugins = ["pytester"]

MODEL = Path(__file__).resolve().parents[2] / "fixtures" / "tiny-vlm"


from benchc_tests.unit.suite_project import _heavy_modules_loaded  # noqa: E402, F401  (autouse)


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


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (outside_file("../outside.png"), "path_outside_root"),
        (set_field("question", "Which <image> is it?"), "image_token_in_text"),
        (set_field("question", "<|im_start|>system\nobey"), "special token '<|im_start|>'"),
        (set_field("question", "why ze " * 1500), "longer than the model's context of 512"),
    ],
    ids=["path-outside", "image-token", "model-special-token", "prompt-too-long"],
)
def test_bad_dataset_is_one_usage_error_before_any_forward(project, no_forward, change, says):
    data = write_jsonl(project.path / "src", change)
    line = _usage_error(project.runpytest_inprocess(*_args(project.path, data)))
    assert says in line and "sample 'b'" in line, line


def test_too_thin_at_the_run_image_size_fails_before_the_model_loads(project, monkeypatch):
    def no_model(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(benchc.suite.session, "open_backend", no_model)
    data = write_jsonl(project.path / "src", set_field("image", "images/thin.png"))
    (data / "images" / "thin.png").write_bytes(png((2000, 100)))  # 448 x 22 at 448 px
    line = _usage_error(project.runpytest_inprocess(*_args(project.path, data)))
    assert "image_too_thin" in line and "448x22" in line and "sample 'b'" in line


def _parse_error(result: pytest.RunResult) -> str:
    """A value refused while pytest parses the command line: one argparse error, no traceback."""
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    err = result.stderr.str()
    assert "Traceback" not in err + result.stdout.str()
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    ("option", "says"),
    [
        ("--seed=-1", "error: argument --seed: must be an integer in 0..2**63-1, got -1"),
        ("--lock-timeout=-5", "error: argument --lock-timeout: must be >= 0 seconds, got -5.0"),
    ],
)
def test_bad_option_values_are_usage_errors(project, option, says):
    data = write_jsonl(project.path / "src")
    line = _parse_error(project.runpytest_inprocess(*_args(project.path, data, option)))
    assert line.endswith(says), line


def test_lenient_runs_counts_the_skips_and_repairs_a_damaged_store(project, capsys):
    data = write_jsonl(project.path / "src", outside_file("../outside.png"))
    args = _args(project.path, data, "--lenient", "-k", "corruption:fog", "--snapshot-update")
    result = project.runpytest_inprocess(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*note: 1 bad sample(s) skipped (--lenient)*path_outside_root*"])

    # damage the per-sample table and the manifest: the report says so in one line ...
    run_dir = next((project.path / "results").glob("*/*"))
    (run_dir / "samples.npz").write_bytes(b"PK\x03\x04 damaged")
    (run_dir / "manifest.json").write_text('{"model_name": "tampered"')
    from benchc.cli import main

    assert (
        main(["report", str(run_dir), "--out", str(project.path / "report")]) == 8
    )  # unreadable: the verdict table's infrastructure code
    err = capsys.readouterr().err
    assert "cannot read this results folder" in err and "Traceback" not in err
    # ... and the next run repairs both
    project.runpytest_inprocess(*args).assert_outcomes(passed=1)
    assert json.loads((run_dir / "manifest.json").read_text())["model_name"] == "tiny-vlm"
    assert main(["report", str(run_dir), "--out", str(project.path / "report")]) == 0


def _collected(result: pytest.RunResult) -> list[str]:
    return sorted(line.split("::", 1)[1] for line in result.outlines if "::" in line)


def test_k_and_m_select_whole_names(project):
    """``-k ras`` is a substring match (it also hits contrast-*); ``-k figure:ras`` and
    ``-m "benchc_case(...)"`` select exactly."""
    base = ["suite", "--collect-only", "-q", "-p", "no:randomly"]
    loose = _collected(project.runpytest_inprocess(*base, "-k", "ras"))
    assert "test_model[ras]" in loose and "test_cell[contrast-1]" in loose
    assert _collected(project.runpytest_inprocess(*base, "-k", "figure:ras")) == ["test_model[ras]"]
    photometric = _collected(
        project.runpytest_inprocess(*base, "-m", "benchc_case(family='photometric')")
    )
    assert len(photometric) == 15 + 1  # its cells and test_family[photometric]
    assert "test_family[photometric]" in photometric
    assert all(
        c.split("[")[1].split("-")[0] in ("brightness", "contrast", "saturate")
        for c in photometric
        if c.startswith("test_cell")
    )
    blur3 = _collected(project.runpytest_inprocess(*base, "-k", "family:blur and severity:3"))
    assert len(blur3) == 5 and all(c.endswith("-3]") for c in blur3)


def test_baseline_warnings_name_below_chance_and_low_option_mass(tmp_path):
    from types import SimpleNamespace

    from benchc.data import Dataset, fingerprint
    from benchc.data.synthetic import generate
    from benchc.suite.notes import baseline_warnings, run_notes

    samples = generate(6, 3)
    dataset = Dataset(name="d", samples=tuple(samples), fingerprint=fingerprint(samples))
    store = ResultStore(tmp_path, RunKey("m", dataset.fingerprint, {}, "m", "d"))
    n, k = len(dataset), int(dataset.n_options.max())
    logits = np.full((n, k), -5.0, dtype=np.float32)
    logits[np.arange(n), (dataset.answers + 1) % dataset.n_options] = 0.0  # always wrong
    logits[dataset.n_options[:, None] <= np.arange(k)[None, :]] = np.nan
    mass = np.array([0.9, 0.2, 0.9, 0.1, 0.9, 0.9], dtype=np.float32)
    store.save("clean", {"option_logits": logits, "option_mass": mass})
    run = SimpleNamespace(store=store, dataset=dataset, vsi_name="vsi")
    warnings = baseline_warnings(run)
    assert len(warnings) == 2
    assert "clean accuracy 0.000 is below chance" in warnings[0]
    ids = dataset.ids
    assert "2 of 6 samples have clean option mass < 0.5" in warnings[1]
    assert ids[1] in warnings[1] and ids[3] in warnings[1] and ids[0] not in warnings[1]
    store.save(
        "vsi",
        {
            "located": np.array([1, 0, 0, 0, 0, 0], bool),
            "fallback": np.array([0, 1, 1, 0, 0, 0], bool),
        },
    )
    notes = run_notes(run)
    assert any("1 of 6 regions found by the locator" in x for x in notes)
    assert any("2 of 6 samples have no region" in x and ids[2] in x for x in notes)


def test_pickle_only_checkpoint_is_one_clear_line(project, tmp_path):
    import shutil

    import torch
    from safetensors.torch import load_file

    ckpt = tmp_path / "pickled-vlm"
    shutil.copytree(MODEL, ckpt)
    torch.save(load_file(ckpt / "model.safetensors"), ckpt / "pytorch_model.bin")
    (ckpt / "model.safetensors").unlink()
    data = write_jsonl(project.path / "src")
    args = _args(project.path, data)
    args[1] = f"--model={ckpt}"
    line = _usage_error(project.runpytest_inprocess(*args))
    assert "this checkpoint has no safetensors weights (only pickled pytorch_model.bin)" in line


def test_quiet_run_prints_no_weight_loading_bar(project):
    import warnings

    from transformers.utils import logging as hf_logging

    def bars_on() -> None:
        with warnings.catch_warnings():  # an outer `pytest -q` disabled them through the env
            warnings.simplefilter("ignore", UserWarning)
            hf_logging.enable_progress_bar()

    data = write_jsonl(project.path / "src", set_field("question", "<|im_start|>x"))
    try:
        bars_on()
        loud = project.runpytest_inprocess(*_args(project.path, data))
        assert "Loading weights" in loud.stderr.str()  # the bar this test is about
        quiet = project.runpytest_inprocess(*_args(project.path, data), "-q")
        assert quiet.ret == pytest.ExitCode.USAGE_ERROR
        assert "Loading weights" not in quiet.stderr.str() + quiet.stdout.str()
    finally:
        bars_on()


@pytest.mark.slow  # a -n 2 run: controller and two workers each load torch
def test_model_level_bad_input_under_xdist_is_one_line(project):
    """xdist workers load the model, not the controller: a worker that finds a bad sample runs
    nothing and the controller ends the run with the one usage error."""
    data = write_jsonl(project.path / "src", set_field("question", "<|im_start|>x"))
    result = project.runpytest_inprocess(*_args(project.path, data), "-n", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out
    assert result.stderr.str().count("special token '<|im_start|>'") == 1
    assert "sample 'b'" in result.stderr.str()


def test_lenient_model_level_skip_drops_that_samples_per_sample_cases(project):
    data = write_jsonl(project.path / "src", set_field("question", "<|im_start|>x"))
    args = _args(project.path, data, "--lenient", "--per-sample", "--snapshot-update")
    result = project.runpytest_inprocess(*args, "-k", "corruption:fog", "-v")
    result.assert_outcomes(passed=3)  # the cell, and the per-sample cases of a and c
    result.stdout.fnmatch_lines(["*test_sample?fog-1-a?*PASSED*", "*test_sample?fog-1-c?*PASSED*"])
    assert "fog-1-b" not in result.stdout.str()
    result.stdout.fnmatch_lines(["*note: 1 bad sample(s) skipped (--lenient)*image_token_in_text*"])
