"""``benchc plan`` with a gate run's grid options prints exactly the MDRs that run prints: every
gate's z and minimal detectable regression, on the default run's slice and on the whole grid
(``-m slow``: two suite runs against the committed baseline, warm after CI's whole-grid line)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchc.gates.plan import Grid, plan, text_table
from benchc.suite.options import parse_corruptions, parse_severities

REPO = Path(__file__).resolve().parents[2]
SLICE = ("gaussian_noise,defocus_blur,fog,contrast,pixelate", "1,3,5", "300")


def _run_records(tmp_path: Path, args: list[str]) -> list[dict]:
    out = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "benchc_tests/suite", "-p", "no:cacheprovider",
           *args, f"--report={out}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads((out / "report.json").read_text())
    return [v for v in doc["verdicts"]["items"] if v.get("mdr") is not None]


@pytest.mark.slow
@pytest.mark.parametrize("grid", ["slice", "whole"])
def test_plan_prints_the_mdrs_a_gate_run_prints(tmp_path, grid):
    if grid == "slice":
        corruptions, severities, limit = SLICE
        args = [f"--corruptions={corruptions}", f"--severities={severities}", f"--limit={limit}"]
        the_grid = Grid(parse_corruptions(corruptions), parse_severities(severities), int(limit))
    else:
        args, the_grid = [], Grid()
    records = _run_records(tmp_path, args)
    rows = {(r.level, r.scope, r.figure): r for r in plan(REPO / "thresholds" / "tiny-vlm",
                                                          grid=the_grid)}  # fmt: skip
    assert len(rows) == len(records), text_table(list(rows.values()))
    for rec in records:
        row = rows[(rec["level"], rec["scope"], rec["figure"])]
        assert row.n == rec["n"]
        assert math.isclose(row.z, rec["z"], rel_tol=1e-12), rec
        assert math.isclose(row.mdr, rec["mdr"], rel_tol=1e-9), (rec, row)
