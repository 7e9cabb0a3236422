"""The plugin's wiring, through pytester: options, registration, selection and usage errors.

None of these runs a model; the model-running scenarios are in ``test_plugin_runs.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

# pytester's in-process runs unload every module first imported inside them, and C extensions
# (torch above all) cannot be imported twice: load the stack an inner run touches out here.
import benchc.corruptions
import benchc.metrics.vsi
import benchc.models.hf
import benchc.suite.session  # noqa: F401
from benchc.suite.options import OPTIONS as DECLARED
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]

#: Every declared option but the hidden one (``benchc.suite.options`` is the one declaration).
OPTIONS = [opt.namespaced for opt in DECLARED if not opt.hidden]  # the short forms: hidden


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory) -> Path:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    folder = tmp_path_factory.mktemp("data") / "ds"
    save_jsonl(generate(6, 3), folder)
    return folder


@pytest.fixture
def suite_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A project laid out like this repository: root conftest + the suite's case files."""
    return make_suite_project(pytester)


def test_options_group_and_single_registration(suite_dir):
    # Loaded by both the entry point and the conftest: pluggy would raise on a double load.
    result = suite_dir.runpytest_inprocess("--help")
    assert result.ret == 0
    out = result.stdout.str()
    assert "benchc structural-robustness suite" in out
    for option in OPTIONS:
        assert option in out, option
    assert "--benchc-degrade" not in out  # hidden, for the suite's own tests


def test_cells_have_readable_ids_and_k_selects_a_family(suite_dir):
    result = suite_dir.runpytest_inprocess("--collect-only", "-q", "-k", "blur", "suite")
    assert result.ret == 0
    ids = [line for line in result.stdout.lines if "test_cell[" in line]
    assert len(ids) == 5 * 5
    assert "suite/test_cells.py::test_cell[defocus_blur-1]" in ids
    assert not any("noise" in line for line in ids)


def test_selection_options_shape_the_grid(suite_dir):
    result = suite_dir.runpytest_inprocess(
        "--collect-only", "-q", "--corruptions=noise,fog", "--severities=2-3", "suite"
    )
    ids = [line for line in result.stdout.lines if "test_cell[" in line]
    assert len(ids) == 5 * 2
    assert "suite/test_cells.py::test_cell[fog-3]" in ids
    assert any("test_model[mixed_cell_rate]" in line for line in result.stdout.lines)
    assert any("test_vsi[gap]" in line for line in result.stdout.lines)
    assert not any("test_sample[" in line for line in result.stdout.lines)  # --per-sample off


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--corruptions=blurry"], "argument --corruptions: unknown corruption or family 'blurry'"),
        (["--severities=0"], "argument --severities: 0 is outside 1..5"),
        (["--severities=x"], "argument --severities: 'x' is not a severity or range"),
        (["--batch-size=0"], "argument --batch-size: must be >= 1, got 0"),
        (["--image-size=8"], "argument --image-size: must be >= 32 px, got 8"),
        (["--image-size=big"], "argument --image-size: invalid int value: 'big'"),
        (["--false-alarm-budget=1"], "argument --false-alarm-budget: must be in (0, 1), got 1.0"),
        (
            ["--benchc-degrade=blur=2"],
            "argument --benchc-degrade: expected damp|sharpen=<x>, got 'blur=2'",
        ),
    ],
)
def test_bad_options_are_one_usage_error(suite_dir, args, message):
    # Refused while pytest parses the command line (argparse type=): option and value named.
    result = suite_dir.runpytest_inprocess("suite", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and f": error: {message}" in errors[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_unknown_model_is_one_clear_error(suite_dir, small_dataset, monkeypatch, xdist):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = suite_dir.runpytest_inprocess(
        "suite",
        "--model=nobody/no-such-model",
        f"--dataset={small_dataset}",
        "--corruptions=fog",
        *xdist,
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count("benchc: --model 'nobody/no-such-model' cannot be loaded") == 1
    assert "passed" not in result.stdout.str() and "failed" not in result.stdout.str()


def test_unit_tests_do_not_load_the_model(suite_dir):
    # A bad --model must not break a run that selects no suite case.
    suite_dir.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = suite_dir.runpytest_inprocess("test_plain.py", "--model=/no/such/folder")
    result.assert_outcomes(passed=1)


def test_snapshot_update_refused_under_xdist(suite_dir):
    result = suite_dir.runpytest_inprocess("suite", "-n", "2", "--snapshot-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--snapshot-update under pytest-xdist" in result.stderr.str()


def test_bad_dataset_is_one_clear_error(suite_dir, tmp_path):
    result = suite_dir.runpytest_inprocess("suite", f"--dataset={tmp_path / 'missing'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.str().count("benchc: --dataset") == 1


def test_markers_are_declared_once():
    # The suite's markers are the plugin's (they must hold wherever it is installed), this
    # checkout's opt-in ones the root conftest's; pyproject repeats neither.
    import ast

    from benchc.suite.collect import MARKERS

    root = Path(__file__).resolve().parents[2]
    tree = ast.parse((root / "conftest.py").read_text())
    opt_in = next(
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "OPT_IN_MARKERS"
    )
    ini = (root / "pyproject.toml").read_text().split("[tool.pytest.ini_options]")[1]
    ini = ini.split("\n[", 1)[0]
    assert "--strict-markers" in ini
    assert not any(line.startswith("markers") for line in ini.splitlines())
    assert opt_in and not set(MARKERS) & set(opt_in)
