"""A plain-Python, one-pair-at-a-time Bench-C reference (docs/spec.md §2 and §4).

The vectorised core is checked against it in the tests and timed against it in
``benchmarks/bench_metrics.py``; keeping one copy means both compare with the same oracle.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def per_pair_reference(
    logits_clean: Sequence[float],
    logits_corrupt: Sequence[float],
    answer: int,
    k: int | None = None,
) -> tuple[float, float, float, bool, bool, bool]:
    """``(dS, dC, RAS, correct, consistent, clean_correct)`` for one pair, from the equations.

    Only the first ``k`` options are used (default: all); ties go to the lowest index.
    """
    k = len(logits_clean) if k is None else k

    def dist(row: Sequence[float]) -> list[float]:
        z = [float(v) for v in row[:k]]
        m = max(z)
        e = [math.exp(v - m) for v in z]
        s = sum(e)
        return [v / s for v in e]

    def terms(p: list[float]) -> tuple[float, float, int]:
        s = -sum(v * math.log(v) for v in p if v > 0) / math.log(k)
        top = max(range(k), key=lambda i: (p[i], -i))
        return s, abs(float(top == answer) - p[top]), top

    s0, c0, t0 = terms(dist(logits_clean))
    s1, c1, t1 = terms(dist(logits_corrupt))
    ds, dc = s1 - s0, c1 - c0
    ras = -dc - max(dc, 0) * max(-ds, 0) - max(ds, 0) * max(-dc, 0)
    return ds, dc, ras, t1 == answer, t1 == t0, t0 == answer
