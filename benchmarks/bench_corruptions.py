"""Corruption engine throughput: all 95 variants of one image at 224 px and 448 px.

Compares, in one run and on the same image, direct ``imagecorruptions.corrupt`` calls (the
reference, unseeded) with benchc serial (``materialize(workers=1)``), benchc with a 2-process pool
(cold = including pool start-up, warm = pool already running) and benchc reading a warm cache.
Prints median seconds and the ratio to the direct calls (below 1 = faster than the reference).

    OMP_NUM_THREADS=1 python benchmarks/bench_corruptions.py [--repeat 3] [--sizes 224 448]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

REF = "direct imagecorruptions (reference)"


def scene(size: int) -> np.ndarray:
    """A gradient with coloured blocks: natural-image-like structure, no download needed."""
    y, x = np.mgrid[0:size, 0:size]
    img = (np.stack([x, y, (x + y) // 2], axis=-1) * 255 // max(size - 1, 1)).astype(np.uint8)
    img[size // 4 : size // 2, size // 5 : size // 2] = (200, 30, 40)
    img[size // 2 :, size // 2 : 3 * size // 4] = (20, 160, 220)
    return img


def timed(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(size: int, repeat: int) -> dict[str, float]:
    """Seconds for all 95 variants of one ``size`` px image, per method."""
    import imagecorruptions

    from benchc.corruptions import CorruptionCache, materialize, shutdown_pools
    from benchc.spec import CORRUPTIONS, SEVERITIES, all_conditions

    image = scene(size)
    conditions = all_conditions()

    def direct() -> None:
        for name in CORRUPTIONS:
            for severity in SEVERITIES:
                imagecorruptions.corrupt(image, severity, name)

    def benchc(workers: int, cache: CorruptionCache | None = None) -> None:
        materialize(
            [("bench", image)], conditions, image_size=size, seed=0, cache=cache, workers=workers
        )

    def cold_pool() -> None:
        shutdown_pools()
        benchc(2)

    out = {
        REF: timed(direct, repeat),
        "benchc serial": timed(lambda: benchc(1), repeat),
        "benchc pool=2, cold (incl. start-up)": timed(cold_pool, 1),
        "benchc pool=2, warm": timed(lambda: benchc(2), repeat),
    }
    with tempfile.TemporaryDirectory() as root:
        cache = CorruptionCache(root)
        out["benchc serial + cache fill"] = timed(lambda: benchc(1, cache), 1)
        out["benchc cache hit"] = timed(lambda: benchc(1, cache), repeat)
    shutdown_pools()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="median of this many runs")
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 448])
    args = parser.parse_args()

    import imagecorruptions

    from benchc.corruptions.engine import _library
    from benchc.spec import CORRUPTIONS

    _library()  # benchc's numba cache; then warm every function once (glass_blur compiles)
    for name in CORRUPTIONS:
        imagecorruptions.corrupt(scene(32), 1, name)

    rows: dict[str, dict[int, float]] = {}
    for size in args.sizes:
        for label, seconds in measure(size, args.repeat).items():
            rows.setdefault(label, {})[size] = seconds

    print(f"cpus={os.cpu_count()} load={os.getloadavg()[0]:.1f} repeat={args.repeat}")
    header = f"{'95 variants of one image':38s}" + "".join(
        f"{f'{s} px s':>10s}{'ratio':>8s}" for s in args.sizes
    )
    print(header)
    print("-" * len(header))
    for label, by_size in rows.items():
        cells = "".join(f"{by_size[s]:10.3f}{by_size[s] / rows[REF][s]:8.3f}" for s in args.sizes)
        print(f"{label:38s}{cells}")


if __name__ == "__main__":
    main()
