"""The served path through the whole suite against the client alone, in one run.

A loopback server that answers at once (``bench_client.py``'s) stands in for a GPU fleet. The
whole default suite (``pytest benchc_tests/suite``: every cell, family, model and VSI case on the
embedded testbed and VSI set, thresholds recorded into a temporary folder) runs against it from
a warm corruption cache; then ``bench_client.py``'s own path (``SuiteRun.condition`` alone, 448 px)
on the same server. Prints requests/s of each, and with ``--profile`` where the suite's seconds
go beyond the requests (cProfile of the suite process, benchc's functions by cumulative time).

    python benchmarks/bench_served_suite.py [--profile]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def suite(url: str, root: Path, tag: str, profile: Path | None) -> tuple[float, int, str]:
    """(wall seconds, requests, output) of the whole suite against ``url``."""
    cmd = [sys.executable]
    if profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile)]
    cmd += [
        "-m",
        "pytest",
        "benchc_tests/suite",
        "-q",
        "-p",
        "no:cacheprovider",
        f"--model=openai:bench@{url}",
        f"--results-dir={root / f'results-{tag}'}",
        f"--cache-dir={root / 'cache'}",
        f"--thresholds-dir={root / f'thresholds-{tag}'}",
        "--snapshot-update",
        "--progress=off",
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    out = done.stdout + done.stderr
    found = re.search(r"queries scored (\d+) by", out)
    if done.returncode not in (0, 1) or found is None:
        sys.exit(f"suite run failed ({done.returncode}):\n{out[-3000:]}")
    return wall, int(found.group(1)), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", action="store_true", help="cProfile the suite process")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    import bench_client

    ctx = mp.get_context("spawn")
    ports = ctx.Queue()
    server = ctx.Process(target=bench_client._serve, args=(ports,), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
            suite(url, root, "warm", None)  # fills the corruption cache; not measured
            profile = root / "suite.prof" if args.profile else None
            load = os.getloadavg()[0]
            wall, n, _ = suite(url, root, "measured", profile)
            print(
                f"whole suite:  {n} requests in {wall:6.1f} s = {n / wall:6.1f} requests/s "
                f"(process start, collection, metrics, gates, report included; load {load:.1f})"
            )
            conditions = [f"gaussian_noise-{s}" for s in (1, 2, 3, 4, 5)]
            from benchc.corruptions import CorruptionCache, prefill
            from benchc.data.loaders import load_dataset

            ds = load_dataset(bench_client.TESTBED)
            prefill(
                [(s.id, s.image()) for s in ds],
                conditions,
                image_size=bench_client.IMAGE_SIZE,
                seed=0,
                cache=CorruptionCache(root / "cache"),
                workers=os.cpu_count() or 1,
            )
            bench_client.new_path(url, root, conditions[:1], args.concurrency, "client-warm")
            n_client = len(ds) * len(conditions)
            began = time.perf_counter()
            bench_client.new_path(url, root, conditions, args.concurrency, "client")
            client_wall = time.perf_counter() - began
            print(
                f"client alone: {n_client} requests in {client_wall:6.1f} s = "
                f"{n_client / client_wall:6.1f} requests/s (bench_client.py's path, 448 px)"
            )
            print(f"suite / client: {(n / wall) / (n_client / client_wall):.2f}")
            if profile is not None:
                import pstats

                stats = pstats.Stats(str(profile))
                stats.sort_stats("cumulative").print_stats(
                    r"benchc[/\\](suite|metrics|models|"
                    r"corruptions|gates|report)",
                    30,
                )
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
