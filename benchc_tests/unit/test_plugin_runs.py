"""The suite end to end, through pytester, on small configurations: snapshot lifecycle,
determinism, per-sample drill-down, kill-and-resume, and xdist equivalence.

Runs are in-process (imports and torch stay warm) except the one that must be killed. Every
configuration is small (a few samples, two cells) so the whole module stays fast on 2 cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

# pytester's in-process runs unload every module first imported inside them, and C extensions
# (torch above all) cannot be imported twice: load the stack an inner run touches out here.
import benchc.corruptions
import benchc.metrics.vsi
import benchc.models.hf
import benchc.suite.session  # noqa: F401
from benchc.results import load_npz
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]

REPO = Path(__file__).resolve().parents[2]
EMBEDDED_MODEL = REPO / "fixtures" / "tiny-vlm"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """The embedded tiny model; an untrained build of it until the trained one is committed."""
    if (EMBEDDED_MODEL / "config.json").is_file():
        return EMBEDDED_MODEL
    from benchc.tinyvlm.build import build_untrained

    return build_untrained(tmp_path_factory.mktemp("model") / "tiny-vlm")


@pytest.fixture(scope="module", autouse=True)
def _heavy_modules_loaded(model_dir):
    """pytester's in-process runs drop every module first imported inside them, and torch's C
    extension cannot be imported a second time: load the whole stack out here, once."""
    import sklearn.linear_model  # noqa: F401
    import torch  # noqa: F401

    from benchc.corruptions import corrupt_array
    from benchc.models import load_backend

    load_backend(str(model_dir))
    image = np.zeros((64, 64, 3), dtype=np.uint8)
    for name in ("fog", "pixelate", "gaussian_noise", "defocus_blur"):
        corrupt_array(image, name, 1, seed=0, sample_id="warm-up")


@pytest.fixture(scope="module")
def small_dataset(tmp_path_factory) -> Path:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    folder = tmp_path_factory.mktemp("data") / "small"
    save_jsonl(generate(10, 7), folder)
    return folder


@pytest.fixture(scope="module")
def medium_dataset(tmp_path_factory) -> Path:
    """32 samples: enough that a washed-out model's accuracy drop exceeds the gate tolerance
    (3 x the combined bootstrap SE), which on 10 samples is wider than the whole drop."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    folder = tmp_path_factory.mktemp("data") / "medium"
    save_jsonl(generate(32, 7), folder)
    return folder


@pytest.fixture(scope="module")
def corruption_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corruptions")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite_project(pytester)


def _args(model: Path, data: Path, cache: Path, root: Path, results: str = "results") -> list[str]:
    return [
        "suite",
        f"--model={model}",
        f"--dataset={data}",
        "--corruptions=fog,pixelate",
        "--severities=2",
        "--batch-size=4",
        f"--results-dir={root / results}",
        f"--cache-dir={cache}",
        f"--thresholds-dir={root / 'thresholds'}",
        "-p",
        "no:randomly",
    ]


def _snapshots(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "thresholds").glob("*/*.json"))}


def _stored(results: Path) -> dict[str, dict[str, np.ndarray]]:
    out = {}
    for path in sorted(results.glob("*/*/*.npz")):
        out[path.name] = load_npz(path)
    return out


def test_default_run_passes_on_the_committed_snapshot(project):
    """The embedded model and testbed against ``thresholds/tiny-vlm`` as committed (read only),
    on one cell to stay fast: its family and model-level gates are checked on the one cell both
    sides have (the whole grid, VSI gates included, is ``pytest benchc_tests/suite``)."""
    result = project.runpytest_inprocess(
        "suite",
        f"--thresholds-dir={REPO / 'thresholds'}",
        f"--results-dir={project.path / 'results'}",
        "--corruptions=fog",
        "--severities=3",
        "-k",
        "not test_vsi",
    )
    result.assert_outcomes(passed=1 + 1 + 15)
    assert "gates: 30 pass" in result.stdout.str()  # 6 cell + 9 family + 15 model figures


@pytest.mark.slow  # five suite runs: none, record, --report, recompute, per-sample (~20 s)
def test_snapshot_lifecycle(project, model_dir, small_dataset, corruption_cache):
    root = project.path
    args = _args(model_dir, small_dataset, corruption_cache, root)

    # 1. No baseline yet: one usage error before any case (not one per case), saying where it
    # looked, what is there, and how to record one.
    result = project.runpytest_inprocess(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert err.count("no baseline 'tiny-vlm'") == 1
    assert "no threshold snapshot in thresholds/tiny-vlm/" in err
    assert "baselines recorded in" in err and ": none" in err
    assert err.count("--snapshot-update") == 2  # from the release, or this model if it is one
    result.assert_outcomes()

    # 2. Record: figures, SEs and rules land in thresholds/tiny-vlm/.
    result = project.runpytest_inprocess(*args, "--snapshot-update")
    result.assert_outcomes(passed=21)
    recorded = _snapshots(root)
    assert {"cell-fog-2.json", "model-mixed_cell_rate.json", "vsi-gap.json"} <= set(recorded)
    assert b'"rules"' in recorded["cell-fog-2.json"]
    assert b'"mdr"' in recorded["cell-fog-2.json"]
    assert b'"evidence"' in recorded["family-weather.json"]
    folder = root / "thresholds" / "tiny-vlm"
    refs = {json.loads(text)["evidence"]["file"] for text in recorded.values()}
    assert {f"arrays/{p.name}" for p in (folder / "arrays").glob("*.npz")} == refs

    # 3. The same model passes, and --report writes the page and its JSON, baseline overlaid.
    report = root / "report"
    result = project.runpytest_inprocess(*args, f"--report={report}")
    result.assert_outcomes(passed=21)
    assert 0 < (report / "report.html").stat().st_size < 5_000_000
    doc = json.loads((report / "report.json").read_text())
    assert [s["kind"] for s in doc["series"]] == ["run", "baseline"]
    assert doc["series"][1]["cells"]["ras"].keys() == {"fog-2", "pixelate-2"}
    said = [line.removeprefix("note: ") for line in result.outlines if line.startswith("note: ")]
    assert doc["notes"] == said  # the page's run notes are the terminal's (none here)
    from benchc.cli import main  # the same report later, from the stored run alone

    argv = ["report", str(root / "results"), "--out", str(root / "again"), "--no-images"]
    assert main([*argv, "--baseline", str(root / "thresholds")]) == 0
    again = json.loads((root / "again" / "report.json").read_text())
    assert again["series"] == doc["series"]

    # 4. Recomputing from scratch gives bit-identical figures (update rewrites nothing).
    result = project.runpytest_inprocess(
        *_args(model_dir, small_dataset, corruption_cache, root, "fresh"), "--snapshot-update"
    )
    result.assert_outcomes(passed=21)
    assert _snapshots(root) == recorded

    # 5. Per-sample drill-down: one case per cell x sample, checked against the cell snapshot;
    # a sample benign noise could flip says it is too noisy to judge instead of passing.
    result = project.runpytest_inprocess(*args, "--per-sample", "-k", "test_sample", "-rs")
    # (the budget is split over the 20 sample cases -k keeps, 0.0005 each: 6 are too noisy)
    result.assert_outcomes(passed=14, skipped=6)
    assert "false-alarm budget 0.01 (weighted Bonferroni): sample 20 x z=3.29" in result.outlines
    skips = [line for line in result.outlines if line.startswith("SKIPPED")]  # one line, counted
    assert len(skips) == 1 and "SKIPPED [6]" in skips[0] and "too noisy to judge" in skips[0]


@pytest.mark.slow  # suite runs with and without a region locator (~7 s)
def test_region_locator_replaces_the_whole_image_fallback(
    project, model_dir, small_dataset, corruption_cache, tmp_path
):
    """Samples without a region: whole-image blur by default, the located box with
    ``--region-locator=foreground``; the VSI arrays of each are stored apart."""
    from dataclasses import replace

    from benchc.data import load_dataset, save_jsonl

    unannotated = tmp_path / "unannotated"
    samples = list(load_dataset(small_dataset))
    stripped = [
        replace(s, meta={k: v for k, v in s.meta.items() if k != "region"}) for s in samples
    ]
    save_jsonl(stripped, unannotated)
    root = project.path
    args = [*_args(model_dir, unannotated, corruption_cache, root), "-k", "test_vsi"]
    for locator in ("none", "foreground"):
        result = project.runpytest_inprocess(
            *args, f"--region-locator={locator}", "--snapshot-update", f"--report={root / locator}"
        )
        result.assert_outcomes(passed=2)
        # the page's run notes are the terminal's "note:" lines (here: the regions' fallback)
        said = [x.removeprefix("note: ") for x in result.outlines if x.startswith("note: ")]
        notes = json.loads((root / locator / "report.json").read_text())["notes"]
        assert notes == said and any("VSI: " in n for n in said), said
    (run_dir,) = (root / "results").glob("*/*")
    whole = load_npz(run_dir / "vsi-aligned.npz")
    located = load_npz(run_dir / "vsi-aligned.foreground.npz")
    assert whole["fallback"].all() and not whole["located"].any()
    # every synthetic image has content on a plain background except the charts (axes span it)
    assert located["located"].sum() >= 8 and not (located["located"] & located["fallback"]).any()
    # blurring only the content moves the answer distribution less than blurring everything
    assert np.median(located["vsi"]) <= np.median(whole["vsi"])


@pytest.mark.slow  # five suite runs on 32 samples (~14 s)
def test_degraded_model_fails_then_update_passes(
    project, model_dir, medium_dataset, corruption_cache
):
    root = project.path
    args = _args(model_dir, medium_dataset, corruption_cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    degraded = [*args, "--benchc-degrade=damp=0.05,sharpen=4"]

    result = project.runpytest_inprocess(*degraded)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert "gate FAIL: accuracy in" in out  # a washed-out image costs the model its answers
    for needed in ("baseline", "current", "tolerance", "samples that moved most"):
        assert needed in out

    project.runpytest_inprocess(*degraded, "--snapshot-update").assert_outcomes(passed=21)
    project.runpytest_inprocess(*degraded).assert_outcomes(passed=21)
    # Back to the original model against the degraded baseline: its accuracy gain is reported,
    # never failed. Its consistency is lower (a washed-out model gives the same answer whatever
    # the corruption), and that structural change is what the consistency/RAS gates flag.
    result = project.runpytest_inprocess(*args)
    out = result.stdout.str()
    assert "improved beyond tolerance" in out
    assert "gate FAIL: accuracy" not in out
    assert "gate FAIL: ras in fog-2" in out and "gate FAIL: consistency in model" in out


@pytest.mark.slow  # three fresh interpreters load torch and the model: ~15 s on a quiet 2-core box
def test_killed_xdist_run_resumes_to_the_serial_figures(
    project, model_dir, small_dataset, corruption_cache
):
    """A ``-n 2`` run killed mid-way, resumed serially, ends bit-identical to an uninterrupted
    serial run: finished conditions are reused, and what the xdist workers computed equals
    what ``-n 0`` computes. (One killed xdist run covers both, to keep this module fast.)"""
    root = project.path
    args = [
        *_args(model_dir, small_dataset, corruption_cache, root),
        "--corruptions=noise",
        "--severities=1-3",
    ]
    # a gate run needs its baseline (recording under -n 2 is refused): recorded serially from
    # another results folder, so the killed run below still computes everything itself
    grid = ["--corruptions=noise", "--severities=1-3", "--snapshot-update"]
    first = [*_args(model_dir, small_dataset, corruption_cache, root, "first"), *grid]
    project.runpytest_inprocess(*first).assert_outcomes(passed=12 + 1 + 15 + 2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *args, "-q", "-n", "2"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    results = root / "results"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(results.glob("*/*/*-*.npz"))) >= 2:
            break
        time.sleep(0.01)
    assert proc.poll() is None, "the run finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)  # controller and both workers
    proc.wait()
    before = {p: p.stat().st_mtime_ns for p in results.glob("*/*/*.npz")}
    assert 2 <= len([p for p in before if "-" in p.stem]) < 12

    record = [*args, "--snapshot-update"]
    project.runpytest_inprocess(*record).assert_outcomes(passed=12 + 1 + 15 + 2)
    for path, mtime in before.items():  # finished conditions were reused, not recomputed
        assert path.stat().st_mtime_ns == mtime, path.name

    reference = [
        a.replace(str(results), str(root / "reference")).replace(
            str(root / "thresholds"), str(root / "reference-thresholds")
        )
        for a in record
    ]
    project.runpytest_inprocess(*reference).assert_outcomes(passed=12 + 1 + 15 + 2)
    resumed, uninterrupted = _stored(results), _stored(root / "reference")
    assert resumed.keys() == uninterrupted.keys()
    for name, arrays in uninterrupted.items():
        for key, value in arrays.items():
            assert resumed[name][key].tobytes() == value.tobytes(), (name, key)
    ref_snapshots = {
        p.name: p.read_bytes() for p in (root / "reference-thresholds").glob("*/*.json")
    }
    assert _snapshots(root) == ref_snapshots


@pytest.mark.slow  # a full record, then subset re-records (~5 s)
def test_subset_rerecord_never_overwrites_full_grid_snapshots(
    project, model_dir, small_dataset, corruption_cache
):
    """``--snapshot-update`` on a subset rewrites only the subset's cells; the model-level and
    family snapshots of the larger grid are kept (with a KEPT line), and every later run, full
    or subset, still checks them: none is skipped."""
    root = project.path
    args = _args(model_dir, small_dataset, corruption_cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    full = _snapshots(root)

    subset = [*args, "--corruptions=fog"]
    result = project.runpytest_inprocess(*subset, "--snapshot-update")
    result.assert_outcomes(passed=1 + 1 + 15 + 2)
    assert "KEPT test_model[ras]: recorded over 2 cells, this run selects 1" in result.stdout.str()
    after = _snapshots(root)
    kept = [n for n in full if n.startswith("model-") or "pixelate" in n]
    assert len(kept) == 15 + 1 and all(after[n] == full[n] for n in kept)

    project.runpytest_inprocess(*args).assert_outcomes(passed=21)
    result = project.runpytest_inprocess(*subset)
    result.assert_outcomes(passed=1 + 1 + 15 + 2)  # model-level gates checked on the shared cell
    assert "gates: 32 pass" in result.stdout.str()  # 6 cell, 9 family, 15 model, 2 VSI


def test_a_damaged_sidecar_fails_its_gate_with_the_rerecord_command(
    project, model_dir, small_dataset, corruption_cache
):
    root = project.path
    args = [*_args(model_dir, small_dataset, corruption_cache, root), "-k", "test_cell"]
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=2)
    for path in (root / "thresholds" / "tiny-vlm" / "arrays").glob("*.npz"):
        path.write_bytes(b"damaged")
    result = project.runpytest_inprocess(*args)
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    assert "is unusable" in out and "unreadable" in out and "--snapshot-update" in out


@pytest.mark.slow  # three suite runs on 32 samples (~12 s)
def test_the_next_look_of_a_sequential_gate_runs_as_printed(
    project, model_dir, medium_dataset, corruption_cache, monkeypatch
):
    """An UNRESOLVED look of ``--looks 2`` on ``--limit 12`` prints the next look's command
    (more of the baseline's samples, look 2): run verbatim, it gates those samples at look 2's
    boundary. Which gates are unresolved is decided by the gate tests (the same model would
    PASS at look 1: test_sequential_gate.py); here one gate is made to sit between its bounds,
    and what is checked is the command benchc prints for it."""
    import benchc.gates.engine as engine
    import benchc.gates.looks as looks

    root = project.path
    args = _args(model_dir, medium_dataset, corruption_cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    real = looks.sequential

    def undecided(records, budget, **kw):
        out, _ = real(records, budget, **kw)
        first_pass = next(r for r in out if r["status"] == "pass")
        first_pass.update(status="unresolved", resolve_n=24, reason="look 1 of 2: between")
        return out, None

    monkeypatch.setattr(engine, "sequential", undecided)
    monkeypatch.setattr(looks, "next_limit", lambda records, cov, look, n_looks: 24)
    first = project.runpytest_inprocess(*args, "--limit=12", "--looks=2", "--strict-gates")
    out = first.stdout.str()
    assert "sequential gate: look 1 of 2 on 12 of the dataset's 32 samples" in out
    assert "spent over 2 looks" in out
    (printed,) = [ln.strip() for ln in first.outlines if ln.strip().startswith("pytest ")]
    assert "--limit=24" in printed and "--look=2" in printed and "--strict-gates" in printed
    monkeypatch.undo()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}

    def run(command: str) -> subprocess.CompletedProcess:
        # as CI runs it: a shell in the folder the first look ran in
        return subprocess.run(
            ["bash", "-c", command], cwd=root, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip

    second = run(printed)
    # the same model: no gate fails on the larger look (under --strict-gates anything but PASS
    # exits 6: on 24 samples the VSI set's insensitive fraction cannot fail, INCONCLUSIVE)
    assert "21 passed" in second.stdout, second.stdout[-3000:] + second.stderr[-3000:]
    assert second.returncode == (0 if "\nPASS" in second.stdout else 6)
    # an exit status of 6 is said, with why and how to opt out
    said = "exit status 6: under --strict-gates a run passes on PASS only" in second.stdout
    assert said == (second.returncode == 6)
    assert "sequential gate: look 2 of 2 on 24 of the dataset's 32 samples" in second.stdout
    over = run(printed.replace("--look=2", "--look=3"))
    assert over.returncode == pytest.ExitCode.USAGE_ERROR
    assert "no look after its last" in over.stderr


@pytest.mark.slow  # a recording and two gate runs on 32 samples (~40 s)
def test_a_subset_spends_the_budget_on_its_own_gates_and_xdist_decides_the_look(
    project, model_dir, medium_dataset, corruption_cache
):
    """``-k`` narrows the gates the false-alarm budget is split over (it counted the deselected
    cases too), and under ``-n 2`` the controller, which runs no case, still applies the
    sequential design the workers gated with: the same model PASSes at look 1 of 2."""
    root = project.path
    args = _args(model_dir, medium_dataset, corruption_cache, root)
    project.runpytest_inprocess(*args, "--snapshot-update").assert_outcomes(passed=21)
    subset = project.runpytest_inprocess(*args, "-k", "test_model and accuracy and not circular")
    subset.assert_outcomes(passed=1)
    assert "false-alarm budget 0.01 (weighted Bonferroni): model 1 x z=2.33" in subset.stdout.str()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *args, "--limit=12", "--looks=2", "-n", "2", "-q"],
        cwd=root, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "stopped at look 1 of 2" in proc.stdout, proc.stdout[-3000:]
