"""benchmarks/bench_served_suite.py on a miniature configuration (12 photographs at 96 px, one
corruption), so the benchmark cannot rot; its numbers are the full run's business."""

from __future__ import annotations

import re

import pytest

from benchc_tests.unit.bench_scripts import run_benchmark


@pytest.mark.slow  # five pytest processes of the suite against a loopback server: ~30 s
def test_bench_served_suite_counts_the_servers_requests_and_prints_ratios() -> None:
    args = ["--image-size=96", "--samples=12", "--corruptions=gaussian_noise", "--workers=2"]
    out = run_benchmark("bench_served_suite.py", *args, "--reference=HEAD", timeout=600)
    assert "12 crops of" in out and "pytest workers 2" in out and "bytecode written" in out
    # 12 samples x (clean + 5 severities) + the VSI set's clean, region and whole passes
    for label in ("this checkout", "reference HEAD"):
        line = next(line for line in out.splitlines() if line.startswith(label))
        numbers = [float(x) for x in re.findall(r"\d+\.?\d*", line[len(label) :])]
        assert numbers[0] == 12 * 6 + 3 * 12, line  # every worker's requests, server-counted
        assert numbers[1] > 0 and numbers[2] == pytest.approx(numbers[0] / numbers[1], rel=0.06)
        # benchc's CPU and the server's apart (/proc counts the server's in 10-ms ticks: a
        # miniature run's ~100 requests may not fill one)
        assert numbers[3] > 0 and len(numbers) == 5 and numbers[4] >= 0
    assert any(line.startswith("this / reference") for line in out.splitlines()), out
