"""Cold-cache cells with and without the background corruption prefetch of ``SuiteRun``.

Runs the same cells twice on the embedded tiny model, each time from an empty corruption cache
and an empty results store: once computing corruptions only when a cell needs them (the
reference), once with ``start_prefetch`` overlapping the corruption pool with the model.
Prints seconds and the ratio to the reference (below 1 = faster), and checks that both runs
stored bit-identical arrays.

    python benchmarks/bench_suite_prefetch.py [--samples 40] [--corruptions noise,blur]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchc.data import load_dataset, save_jsonl
from benchc.data.synthetic import generate
from benchc.suite.config import DEFAULT_MODEL, SuiteConfig, parse_corruptions
from benchc.suite.run import SuiteRun, default_corruption_workers
from benchc.suite.session import open_backend


def run_cells(cfg: SuiteConfig, backend, prefetch: bool) -> tuple[float, dict]:
    dataset = load_dataset(cfg.dataset)
    run = SuiteRun(cfg, dataset, backend, corruption_workers=default_corruption_workers(None))
    start = time.perf_counter()
    if prefetch:
        run.start_prefetch(cfg.conditions)
    out = {key: run.condition(key) for key in ["clean", *cfg.conditions]}
    run.stop_prefetch()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--corruptions", default="noise,blur")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        save_jsonl(generate(args.samples, 11), root / "data")
        times, arrays = {}, {}
        for label, prefetch in (("on demand (reference)", False), ("prefetch", True)):
            cfg = SuiteConfig(
                model=DEFAULT_MODEL,
                dataset=str(root / "data"),
                corruptions=parse_corruptions(args.corruptions),
                image_size=128,
                results_dir=root / f"results-{prefetch}",
                cache_dir=root / f"cache-{prefetch}",
            )
            backend = open_backend(cfg)
            times[label], arrays[label] = run_cells(cfg, backend, prefetch)
        ref = times["on demand (reference)"]
        for label, seconds in times.items():
            print(f"{label:<24} {seconds:8.1f} s   ratio {seconds / ref:.2f}")
        a, b = arrays.values()
        same = all(a[k][n].tobytes() == b[k][n].tobytes() for k in a for n in a[k])
        print(f"stored arrays bit-identical: {same}")


if __name__ == "__main__":
    main()
