"""``benchmarks/gate_power.py`` still works end to end, on a miniature configuration (a small
testbed and VSI set, one corruption, two resamples): every zoo member runs through the real
gates and gets its row, and the reference model never fails against itself. Opt-in
(``-m gate_power``, its own ``.ci/run`` line); docs/measurements.md's table is the full run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchc.testing.dev import zoo

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gate_power
def test_gate_power_runs_every_zoo_member_through_the_gates(tmp_path):
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    save_jsonl(generate(16, 3), tmp_path / "testbed")
    save_jsonl(generate(24, 5), tmp_path / "vsi")
    cmd = [
        sys.executable, str(REPO / "benchmarks" / "gate_power.py"),
        "--resamples", "2", "--quick", "--corruptions", "fog,gaussian_blur", "--severities", "3",
        "--dataset", str(tmp_path / "testbed"), "--vsi-dataset", str(tmp_path / "vsi"),
        "--results-dir", str(tmp_path / "results"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "| kind |" not in ln]
    names = {r.split("|")[1].strip() for r in rows}
    mutants = {m.name for m in (*zoo.GRID_MUTANTS, *zoo.VSI_MUTANTS)}
    assert mutants | {"bfloat16", "batch size 1", "weight noise 1e-3"} <= names
    reference = next(r for r in rows if r.startswith("| reference (itself)"))
    assert "| 0/2 (0%) |" in reference
    assert "false-alarm budget 0.01" in out.stdout and "gate checks" in out.stdout
    # the budget counts every gate the cases run (2 cells x 6 gated cell figures, ...)
    assert "(weighted Bonferroni): cell 12 x z=" in out.stdout
    # benign variants: a column of runs left UNRESOLVED, which they must never be
    benign = [r for r in rows if r.split("|")[2].strip() == "benign"]
    assert {"attention eager", "re-saved in bfloat16"} <= {r.split("|")[1].strip() for r in benign}
    assert all(r.split("|")[5].strip().endswith("/2") for r in benign)
    # ... and a benign variant left UNRESOLVED is named with its gates under the table
    note = [ln for ln in out.stdout.splitlines() if ln.startswith("# UNRESOLVED gates")]
    unresolved = [r.split("|")[1].strip() for r in benign if r.split("|")[5].strip() != "0/2"]
    assert bool(note) == bool(unresolved)
    for name in unresolved:
        assert f"{name}: " in note[0], note
