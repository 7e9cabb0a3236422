"""The release gate as a model team runs it (issue 22), in-process on small configurations:
a candidate under its own name gated against a named baseline, one message per run when the
workflow cannot proceed, comparability before the first forward pass, honest recording,
provenance, smoke runs and the CI surfaces. About two minutes of model runs on 2 cores, so
``-m slow`` (the default run keeps its pace); the recipe end to end (two tiny real-family
checkpoints, every printed command run verbatim) is ``test_release_recipe.py``, also slow.
"""

from __future__ import annotations

import json
import shlex
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

# pytester's in-process runs unload every module first imported inside them, and C extensions
# (torch above all) cannot be imported twice: load the stack an inner run touches out here.
import benchc.corruptions
import benchc.metrics.vsi
import benchc.models.hf
import benchc.suite.session  # noqa: F401
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EMBEDDED_MODEL = REPO / "fixtures" / "tiny-vlm"


@pytest.fixture(scope="module", autouse=True)
def _heavy_modules_loaded():
    import sklearn.linear_model  # noqa: F401
    import torch  # noqa: F401

    from benchc.corruptions import corrupt_array
    from benchc.models import load_backend

    load_backend(str(EMBEDDED_MODEL))
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    for name in ("fog", "pixelate"):
        corrupt_array(image, name, 1, seed=0, sample_id="warm-up")


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    """The released checkpoint and a candidate: the same weights in a folder of another name,
    as ``checkpoints/rc2`` would be."""
    root = tmp_path_factory.mktemp("ckpt")
    release = shutil.copytree(EMBEDDED_MODEL, root / "tiny-vlm-release")
    rc2 = shutil.copytree(EMBEDDED_MODEL, root / "tiny-vlm-rc2")
    return {"release": Path(release), "rc2": Path(rc2)}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> dict[str, Path]:
    """A 10-sample dataset (not the embedded testbed) and another one (another VSI set)."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    root = tmp_path_factory.mktemp("data")
    save_jsonl(generate(10, 7), root / "small")
    save_jsonl(generate(10, 8), root / "other")
    save_jsonl(generate(32, 7), root / "medium")  # a washed-out model fails on it
    save_jsonl(generate(4, 9), root / "four")  # a VSI set too small for the gap's probe
    names = ("small", "other", "medium", "four")
    return {name: root / name for name in names}


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corruptions")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite_project(pytester)


def _args(model: Path, data: Path, cache: Path, root: Path, *extra: str) -> list[str]:
    return [
        "suite",
        f"--model={model}",
        f"--dataset={data}",
        "--corruptions=fog,pixelate",
        "--severities=2",
        "--batch-size=4",
        f"--results-dir={root / 'results'}",
        f"--cache-dir={cache}",
        f"--thresholds-dir={root / 'thresholds'}",
        "-p",
        "no:randomly",
        *extra,
    ]


def _inner(printed: str) -> list[str]:
    """A printed ``pytest benchc_tests/suite ...`` command as this pytester project runs it
    (its copy of the suite is ``suite/``); every option verbatim."""
    argv = shlex.split(printed)
    assert argv[:3] == ["pytest", "--pyargs", "benchc_tests.suite"], printed  # run from here
    return ["suite", *argv[3:], "-p", "no:randomly"]


def _commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("pytest ")]


def test_a_candidate_is_gated_against_a_named_baseline(
    project, models, data, cache, monkeypatch, tmp_path
):
    root = project.path
    release = _args(models["release"], data["medium"], cache, root, "--baseline=release")
    rc2 = _args(models["rc2"], data["medium"], cache, root)

    # 1. Record the released checkpoint under the name it is given; its manifest says where.
    result = project.runpytest_inprocess(*release, "--snapshot-update")
    result.assert_outcomes(passed=21)
    folder = root / "thresholds" / "release"
    assert len(list(folder.glob("*.json"))) == 21  # 2 cells, 2 families, 15 model, 2 VSI
    assert not (root / "thresholds" / "tiny-vlm-release").exists()
    manifest = json.loads((folder / "baseline.manifest").read_text())
    env = manifest["environment"]
    assert set(env) == {"benchc", "torch", "transformers", "device", "dtype"}
    assert env["dtype"] == "float32" and env["device"].startswith("cpu")
    assert manifest["model"] == str(models["release"])

    # 2. The candidate without --baseline: one usage error before any case, saying where it
    # looked and what is there, never suggesting to record the candidate as its own baseline.
    result = project.runpytest_inprocess(*rc2)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count("no baseline 'tiny-vlm-rc2'") == 1
    assert "thresholds/tiny-vlm-rc2/" in err and "thresholds: release" in err
    commands = _commands(err)
    assert any("--baseline=release" in c and "--snapshot-update" not in c for c in commands)
    assert not any(f"--model={models['rc2']}" in c for c in commands if "--snapshot-update" in c)
    result.assert_outcomes()

    # 3. The printed gate command, run as printed: the candidate passes against "release", and
    # the summary, the JUnit properties and the step summary name both sides.
    (gate,) = [c for c in commands if "--baseline=release" in c]
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = project.runpytest_inprocess(*_inner(gate), f"--junitxml={junit}")
    result.assert_outcomes(passed=21)
    out = result.stdout.str()
    assert f"candidate: tiny-vlm-rc2 ({models['rc2']})" in out
    assert "baseline: release (" in out
    props = [(p.get("name"), p.get("value")) for p in ET.parse(junit).iter("property")]
    assert ("benchc.candidate", "tiny-vlm-rc2") in props
    assert ("benchc.baseline", "release") in props
    assert any(n == "benchc.baseline.source" and v.endswith("release") for n, v in props)
    md = summary.read_text()
    assert "candidate **tiny-vlm-rc2**" in md and "baseline **release**" in md

    # 4. benchc report overlays a baseline of another name and names both sides; exit 0.
    from benchc.cli import EXIT_GATE_FAILED, EXIT_OK, main

    (run_dir,) = (root / "results" / "tiny-vlm-rc2").iterdir()
    argv = ["report", str(run_dir), "--baseline", str(folder), "--no-images"]
    assert main([*argv, "--out", str(tmp_path / "rep")]) == EXIT_OK
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert doc["sides"]["candidate"]["name"] == "tiny-vlm-rc2"
    assert doc["sides"]["baseline"]["name"] == "release"
    assert [s["kind"] for s in doc["series"]] == ["run", "baseline"]
    assert doc["series"][1]["name"] == "release"
    assert "release" in (tmp_path / "rep" / "report.html").read_text()

    # 5. A washed-out candidate fails, and so does benchc report on its stored run.
    result = project.runpytest_inprocess(*_inner(gate), "--benchc-degrade=damp=0.05,sharpen=4")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    bad = next(p for p in (root / "results").glob("*/*") if p != run_dir and "rc2" in str(p))
    # its failures print a drill-down: run as printed, it reads the same stored outputs
    drill = next(ln.split("drill down: ", 1)[1] for ln in result.outlines if "drill down: " in ln)
    assert "--benchc-degrade=damp=0.05,sharpen=4" in drill and "--baseline=release" in drill
    stored = sorted((root / "results").glob("*/*"))
    again = project.runpytest_inprocess(*_inner(drill))
    assert again.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    ran = again.parseoutcomes()
    cases = sum(ran.get(k, 0) for k in ("passed", "skipped", "failed"))
    assert cases in (32, 64)  # every sample of the gate's cells, one case each
    assert sorted((root / "results").glob("*/*")) == stored
    assert main(["report", str(bad), "--baseline", str(folder), "--no-images",
                 "--out", str(tmp_path / "bad")]) == EXIT_GATE_FAILED  # fmt: skip


def test_a_mismatch_is_one_usage_error_before_the_first_forward_pass(project, models, data, cache):
    root = project.path
    release = _args(models["release"], data["small"], cache, root, "--baseline=release")
    project.runpytest_inprocess(*release, "--snapshot-update").assert_outcomes(passed=21)
    stored = {p for p in (root / "results").rglob("*.npz")}

    for extra, option, recorded, fix in (
        (["--image-size=160"], "--image-size", "448 px", "--image-size=448"),
        (["--seed=3"], "--seed", "seed 0", None),
        ([f"--vsi-dataset={data['other']}"], "--vsi-dataset", "'small'", None),
        (["--corruptions=fog,pixelate,snow"], "--corruptions/--severities", "2 cells", None),
    ):
        start = time.perf_counter()
        result = project.runpytest_inprocess(*release, *extra)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, extra
        err = result.stderr.str()
        assert err.count("cannot be gated against baseline release") == 1
        assert f"  {option}: " in err and recorded in err
        first = _commands(err)[0]
        if fix:
            assert fix in first
        assert "--snapshot-update" not in first  # the likelier fix first: the baseline's setting
        assert time.perf_counter() - start < 30
        result.assert_outcomes()
    assert {p for p in (root / "results").rglob("*.npz")} == stored  # nothing was computed

    # the fix, run as printed, passes: no loop
    result = project.runpytest_inprocess(*release, "--image-size=160")
    fixed = _inner(_commands(result.stderr.str())[0])
    project.runpytest_inprocess(*fixed).assert_outcomes(passed=21)


def test_recording_names_what_cannot_be_gated_and_a_rule_stays_off(project, models, data, cache):
    root = project.path
    four = f"--vsi-dataset={data['four']}"
    args = _args(models["release"], data["small"], cache, root, four)
    result = project.runpytest_inprocess(*args, "--snapshot-update")
    result.assert_outcomes(passed=21)
    out = result.stdout.str()
    # one block: the gap is undefined on a 4-sample VSI set (reason and remedy, in numbers)
    assert out.count("with gates no later run can check:") == 1
    assert "gap in vsi:" in out and "distinct image(s)" in out and "5 grouped folds" in out
    assert "remedy: record the baseline on a larger --vsi-dataset" in out
    # the fix names the snapshot's own rule, switched off (its direction and floor as recorded)
    path = root / "thresholds" / "tiny-vlm-release" / "vsi-gap.json"
    (rule,) = [r for r in json.loads(path.read_text())["rules"] if r.startswith("gap:")]
    assert f"changing its rule to '{rule}:off'" in out

    # --strict-gates on the unchanged checkpoint fails its case, naming the remedy, and the run
    # is INCONCLUSIVE (an unchecked gate under --strict-gates): the verdict table's 6, not a
    # regression's 1
    result = project.runpytest_inprocess(*args, "--strict-gates")
    assert result.ret == 6 and "\nINCONCLUSIVE:" in result.stdout.str()
    out = result.stdout.str()
    assert "gap is undefined on the baseline" in out and "fix: " in out and ":off'" in out

    # switched off in the snapshot: strict passes, and re-recording keeps it off
    path = root / "thresholds" / "tiny-vlm-release" / "vsi-gap.json"
    snap = json.loads(path.read_text())
    snap["rules"] = [r + ":off" if r.startswith("gap:") else r for r in snap["rules"]]
    path.write_text(json.dumps(snap, indent=1) + "\n")
    result = project.runpytest_inprocess(*args, "--strict-gates")
    result.assert_outcomes(passed=21)
    assert "OFF gap in vsi: switched off in the snapshot" in result.stdout.str()
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    assert any(r.endswith(":off") for r in json.loads(path.read_text())["rules"])


def test_smoke_run_and_ci_surfaces(project, models, data, cache):
    root = project.path
    args = _args(models["release"], data["small"], cache, root)
    result = project.runpytest_inprocess(*args, "--snapshot-update")
    result.assert_outcomes(passed=21)
    assert "deselected" not in result.stdout.str()  # no hidden per-sample placeholder

    # --limit: gates on the samples both sides hold, and the summary says so
    result = project.runpytest_inprocess(*args, "--limit=6")
    result.assert_outcomes(passed=21)
    out = result.stdout.str()
    assert "smoke run (--limit 6)" in out
    assert "deselected" not in out
    # a baseline is never recorded from a smoke run
    result = project.runpytest_inprocess(*args, "--limit=6", "--snapshot-update")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "--limit with --snapshot-update" in result.stderr.str()


def test_a_baseline_from_another_environment_is_one_line_and_still_gated(
    project, models, data, cache, tmp_path
):
    root = project.path
    args = _args(models["release"], data["small"], cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    path = root / "thresholds" / "tiny-vlm-release" / "baseline.manifest"
    manifest = json.loads(path.read_text())
    manifest["environment"]["torch"] = "1.0.0"
    path.write_text(json.dumps(manifest))
    result = project.runpytest_inprocess(*args, "--report", str(tmp_path / "rep"))
    result.assert_outcomes(passed=21)
    lines = [ln for ln in result.outlines if "recorded in another environment" in ln]
    assert len(lines) == 1 and "torch 1.0.0 -> " in lines[0]
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert "recorded in another environment: torch 1.0.0 -> " in doc["baseline_note"]
    # the store is keyed by the releases that can change numbers
    (run_dir,) = (root / "results" / "tiny-vlm-release").iterdir()
    settings = json.loads((run_dir / "manifest.json").read_text())["settings"]
    from importlib.metadata import version

    assert settings["torch"] == version("torch")
    assert settings["transformers"] == version("transformers")


def test_an_inconclusive_run_says_so_everywhere_and_can_fail(
    project, models, data, cache, tmp_path
):
    """Issue 32: 10 samples on 2 cells leave model-level gates that cannot fail; the run's
    verdict is INCONCLUSIVE in the summary, the report, JUnit and the run manifest's
    provenance; ``--inconclusive=fail`` exits 6, the default keeps the exit status."""
    root = project.path
    args = _args(models["release"], data["small"], cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    junit = tmp_path / "junit.xml"
    result = project.runpytest_inprocess(*args, "--report", str(tmp_path / "rep"),
                                         f"--junitxml={junit}")  # fmt: skip
    assert result.ret == 0
    doc = json.loads((tmp_path / "rep" / "report.json").read_text())
    overall = doc["overall"]
    assert overall["state"] == "inconclusive"
    assert any(r["kind"] == "powerless" for r in overall["reasons"])
    out = result.stdout.str()
    assert overall["headline"] in out and all(r["text"] in out for r in overall["reasons"])
    suite = ET.parse(junit).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["benchc.verdict"] == "inconclusive"
    # provenance of the numbers: when and by which command they were computed
    run = doc["provenance"]["run"]
    assert run["computed"] and "--snapshot-update" in run["command_line"]
    assert doc["provenance"]["session"]["date"] >= run["computed"]
    failing = project.runpytest_inprocess(*args, "--inconclusive=fail")
    assert failing.ret == 6
