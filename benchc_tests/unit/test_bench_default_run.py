"""benchmarks/bench_default_run.py on a miniature default run (one cell of the suite beside one
unit-test module), so the benchmark cannot rot; its numbers are the full run's business."""

from __future__ import annotations

import subprocess

import pytest

from benchc_tests.unit.bench_scripts import ROOT, run_benchmark


@pytest.mark.slow  # six pytest processes, each loading torch and the model: ~1-2 min on 2 cores
def test_bench_default_run_measures_both_commits_and_prints_ratios() -> None:
    # a shallow clone may lack the commit before: HEAD stands in (the script is under test)
    known = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", "HEAD~1^{commit}"])
    reference = "HEAD~1" if known.returncode == 0 else "HEAD"
    mini = "benchc_tests/suite/test_cells.py benchc_tests/unit/test_spec_doc.py"
    out = run_benchmark(
        "bench_default_run.py",
        f"--reference={reference}",
        f"--pytest-args={mini} --corruptions=fog --severities=1",
    )
    for side in ("this", "reference"):
        for kind in ("cold", "warm"):
            assert any(line.startswith(f"{side:10s} {kind}") for line in out.splitlines()), out
        assert any(line.startswith(f"{side:10s} start-up") for line in out.splitlines()), out
    ratios = next(line for line in out.splitlines() if line.startswith("this/reference: "))
    for part in ("cold wall x", "warm wall x", "CPU x", "machine busy x", "start-up x"):
        assert part in ratios, ratios
    assert "load average before" in out and "load average after" in out
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "list"], capture_output=True, text=True
    )
    assert "bench-default-run-" not in listed.stdout  # the reference checkout is removed
