"""Issue 50 end to end (``-m slow``, ~90 s): the suite run against edited copies of the embedded
model, as a release manager runs it.

- normalisation 0.5/0.5: the summary names both changed keys, the failing case says where to look
  first (before its movers), report.json and the page carry the same list;
- processor size 224: one usage error (exit 4) from the pre-flight, naming the setting, in at most
  20 lines, before any case runs;
- a baseline that recorded no identity: the summary says so, and the run is still gated.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchc.gates.baselines import MANIFEST, read_manifest, write_manifest
from benchc.gates.states import EXIT_USAGE
from benchc_tests.unit.test_preflight_probe import edited_copy

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "tiny-vlm"


def _suite(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "benchc_tests/suite", "-n", "0", "-p", "no:cacheprovider",
         "--corruptions=gaussian_noise", "--severities=5", "--limit=300", "-k", "test_cell",
         f"--results-dir={tmp_path / 'r'}", f"--cache-dir={tmp_path / 'c'}", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_normalisation_edit_is_named_in_summary_failure_report_and_page(tmp_path):
    model = edited_copy(tmp_path, "norm", image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    run = _suite(tmp_path, f"--model={model}", "--baseline=tiny-vlm", f"--report={tmp_path / 'p'}")
    out = run.stdout
    assert run.returncode == 1, out[-3000:]
    changed = [
        "  processor_config.json: image_processor.image_mean [0.4815, 0.4578, 0.4082] -> "
        "[0.5, 0.5, 0.5]",
        "  processor_config.json: image_processor.image_std [0.2686, 0.2613, 0.2758] -> "
        "[0.5, 0.5, 0.5]",
    ]
    summary = out[out.index("= benchc =") :].splitlines()
    start = summary.index("changed since baseline (2):")
    assert summary[start + 1 : start + 3] == changed
    assert summary.index("baseline: tiny-vlm (thresholds/tiny-vlm)") < start
    # the failing case: the changed settings first, then the movers, then accept or re-record
    case = out[out.index("gate FAIL: ") : out.index("= benchc =")]
    look = case.index("look first: changed since baseline: processor_config.json: image_processor")
    assert look < case.index("samples that moved most") < case.index("if this change is intended")
    assert "churn: " in case and " wrong -> right (net " in case
    doc = json.loads((tmp_path / "p" / "report.json").read_text())
    assert [c["line"] for c in doc["changes"]["changes"]] == [c.strip() for c in changed]
    assert doc["changes"]["changes"][0]["was"] == pytest.approx([0.48145466, 0.4578275, 0.40821073])
    page = (tmp_path / "p" / "report.html").read_text()
    assert 'id="changes-list"' in page and "image_processor.image_std" in page


def test_an_impossible_processor_size_stops_in_preflight(tmp_path):
    model = edited_copy(tmp_path, "s224", size={"height": 224, "width": 224})
    run = _suite(tmp_path, f"--model={model}", "--baseline=tiny-vlm")
    assert run.returncode == EXIT_USAGE, run.stdout[-2000:] + run.stderr[-2000:]
    err = run.stderr[run.stderr.index("ERROR: benchc: ") :].strip().splitlines()
    assert len(err) <= 20
    assert "cannot take its input: pre-flight query of sample" in err[0]
    assert (
        "image_processor.size is 224x224 px, the model's vision_config.image_size is 128 px"
        in (err[1])
    )
    assert run.stderr.count("ERROR: benchc:") == 1
    assert "Traceback" not in run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]  # no case ran
    assert " passed" not in last and " failed" not in last, last


def test_a_baseline_without_identity_says_so_and_still_gates(tmp_path):
    thresholds = tmp_path / "thresholds"
    shutil.copytree(REPO / "thresholds" / "tiny-vlm", thresholds / "tiny-vlm")
    manifest = read_manifest(thresholds / "tiny-vlm")
    manifest.pop("identity")
    manifest.pop("benchc_baseline")
    write_manifest(thresholds / "tiny-vlm", manifest)
    assert "identity" not in (thresholds / "tiny-vlm" / MANIFEST).read_text()
    run = _suite(tmp_path, f"--thresholds-dir={thresholds}", "--baseline=tiny-vlm")
    assert run.returncode == 0, run.stdout[-3000:]
    assert (
        "changed since baseline: unknown: the baseline recorded no checkpoint identity "
        "(re-record to get one)"
    ) in run.stdout
    assert "PASS: no gate failed" in run.stdout
