"""Bench-C metrics on a paper-sized grid: 13 models x 849 samples x 95 conditions, K = 4.

Times the vectorised core (benchc.metrics: per-pair S/C/dS/dC/RAS, per-cell accuracy, dAcc,
consistency, relative robustness, R_c/R_w/alpha/pi, Mixed-cell rate, sign regimes, trajectories,
Table VI ranking) on all 1,048,935 pairs, against a plain per-pair Python implementation of the
per-pair quantities, run in the same process on a slice and scaled per pair.

    python benchmarks/bench_metrics.py [--models 13] [--samples 849] [--slice 40] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from benchc.metrics import compute_grid, rank_table_from_grids
from benchc.metrics.reference import per_pair_reference


def all_metrics(logits_clean, logits_corrupt, answers):
    """Everything Bench-C reports for a set of models, vectorised."""
    grids = {}
    for m in range(logits_clean.shape[0]):
        g = compute_grid(logits_clean[m], logits_corrupt[m], answers)
        g.trajectories()
        g.regimes()
        grids[f"model{m}"] = g
    return grids, rank_table_from_grids(grids)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=13)
    ap.add_argument("--samples", type=int, default=849)
    ap.add_argument("--slice", type=int, default=100, help="samples of one model for the loop")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    m, n, d, sev, k = args.models, args.samples, 19, 5, 4
    lc = rng.normal(size=(m, n, k)).astype(np.float32)
    lx = (lc[:, :, None, None, :] + rng.normal(size=(m, n, d, sev, k))).astype(np.float32)
    y = rng.integers(0, k, n)
    pairs = m * n * d * sev

    all_metrics(lc[:1, :8], lx[:1, :8], y[:8])  # warm-up (imports, first-call allocation)
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        grids, table = all_metrics(lc, lx, y)
        times.append(time.perf_counter() - t0)
    vec = min(times)

    s = args.slice
    slc, slx = lc[0, :s].tolist(), lx[0, :s].tolist()
    t0 = time.perf_counter()
    ref = [
        [
            [per_pair_reference(slc[i], slx[i][j][s_], int(y[i])) for s_ in range(sev)]
            for j in range(d)
        ]
        for i in range(s)
    ]
    loop = time.perf_counter() - t0
    loop_pairs = s * d * sev
    got = grids["model0"].ras[:s]
    err = float(np.max(np.abs(np.array(ref)[..., 2] - got)))

    loop_per_pair = loop / loop_pairs
    print(f"grid: {m} models x {n} samples x {d * sev} conditions = {pairs:,} pairs, K={k}")
    print(f"vectorised, all Bench-C metrics + Table VI: {vec:.3f} s (best of {args.repeat})")
    print(f"  = {vec / pairs * 1e9:.1f} ns per pair")
    print(
        f"per-pair Python loop (dS, dC, RAS, correct, consistent, clean) on {loop_pairs:,} pairs:"
    )
    print(f"  {loop:.3f} s = {loop_per_pair * 1e6:.2f} us per pair")
    print(f"  extrapolated to the whole grid: {loop_per_pair * pairs:.1f} s")
    print(f"speed-up vs per-pair loop: {loop_per_pair * pairs / vec:.0f}x")
    print(f"max |RAS vectorised - RAS loop| on the slice: {err:.2e}")
    print(f"Table VI rows (RAS order): {', '.join(table.models[:3])}, ...")


if __name__ == "__main__":
    main()
