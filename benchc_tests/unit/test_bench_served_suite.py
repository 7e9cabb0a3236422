"""benchmarks/bench_served_suite.py on a miniature configuration (12 photographs at 96 px, one
corruption), so the benchmark cannot rot; its numbers are the full run's business."""

from __future__ import annotations

import re

import pytest

from benchc_tests.unit.bench_scripts import ROOT, run_benchmark


@pytest.mark.slow  # five pytest processes of the suite against a loopback server: ~30 s
def test_bench_served_suite_counts_the_servers_requests_and_prints_ratios() -> None:
    args = ["--image-size=96", "--samples=12", "--corruptions=gaussian_noise", "--workers=2"]
    args += ["--latency-ms=5", "--model-args=concurrency=8"]
    out = run_benchmark("bench_served_suite.py", *args, "--reference=HEAD", timeout=600)
    assert "12 crops of" in out and "pytest workers 2" in out and "bytecode written" in out
    assert "model args concurrency=8" in out and "answering 5 ms after each request" in out
    # 12 samples x (clean + 5 severities) + the VSI set's clean, region and whole passes + the
    # 3 other rotations of 4 options on the clean image and severity 3 (docs/spec.md §1)
    for label in ("this checkout", "reference HEAD"):
        line = next(line for line in out.splitlines() if line.startswith(label))
        numbers = [float(x) for x in re.findall(r"\d+\.?\d*", line[len(label) :])]
        # every worker's requests, server-counted; each of the 2 workers decides its route with
        # a probe before its first query (docs/guides/servers.md), whose answer is reused: at
        # most one request a worker beyond the grid's
        grid = 12 * 6 + 3 * 12 + 12 * 2 * 3
        assert grid <= numbers[0] <= grid + 2, line
        assert numbers[1] > 0 and numbers[2] == pytest.approx(numbers[0] / numbers[1], rel=0.06)
        # benchc's CPU and the server's apart (/proc counts the server's in 10-ms ticks: a
        # miniature run's ~100 requests may not fill one)
        assert numbers[3] > 0 and len(numbers) == 5 and numbers[4] >= 0
    assert any(line.startswith("this / reference") for line in out.splitlines()), out


@pytest.mark.parametrize("latency_s", [0.0, 0.4])
def test_the_benchmarks_server_answers_after_its_latency(latency_s: float) -> None:
    """The stand-in fleet (``--latency-ms``): each answer comes ``latency`` after its request,
    on every connection at once (timers, not a thread per request), and is counted."""
    import multiprocessing as mp
    import sys
    import time
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_client

    ctx = mp.get_context("spawn")
    ports, answered = ctx.Queue(), ctx.Value("q", 0)
    server = ctx.Process(target=bench_client._serve, args=(ports, answered, latency_s))
    server.start()
    try:
        url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1/chat/completions"

        def post(_: int) -> float:
            began = time.perf_counter()
            httpx.post(url, json={"model": "m"}, timeout=30).raise_for_status()
            return time.perf_counter() - began

        with ThreadPoolExecutor(8) as pool:
            began = time.perf_counter()
            took = list(pool.map(post, range(8)))
            wall = time.perf_counter() - began
    finally:
        server.terminate()
        server.join(5)
    assert answered.value == 8
    assert min(took) >= latency_s
    if latency_s:  # eight at once: one latency, not eight in a row
        assert wall < 4 * latency_s
