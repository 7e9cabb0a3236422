"""Monte Carlo of a sequential design over many correlated gates: the run's verdict, its looks.

Each gate's per-sample paired difference is ``change_g + sigma_g (sqrt(rho) u_i + sqrt(1 - rho)
e_ig)`` (u shared by the gates, e their own; ``sigma_g = se_full sqrt(N)``). A draw is one run:
at each look the gates' changes (sample means) and paired SEs *estimated from the samples used*
(``sd / sqrt(n)``, as the engine estimates its own) go through the design's one rule
(:func:`benchc.gates.design.states`); the run stops at the first look where a gate fails or all
are futile.

The per-sample data are drawn exactly through their sufficient statistics (no N-by-gates array
per draw): per look's new chunk of m samples, the shared part's mean and sum of squares
(normal, chi2 m-1), and per gate its own mean, its component along the shared part (normal)
and the rest (chi2 m-2); chunks pool by Chan's formula. ``test_spending`` checks it against
literally drawn samples. ``data=False`` uses the planned SEs (the z statistics' own process).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchc.gates.design import Design, GateDesign, states


@dataclass(frozen=True)
class SimResult:
    """Shares of ``draws`` runs: FAIL, PASS, UNRESOLVED (futility obeyed); ``crossed``: some
    gate crossed an efficacy bound at some look with every look run (futility ignored: the
    false-alarm event the budget bounds); ``fraction``: mean share of the design's samples
    used; ``stops``: runs stopped per look; ``gate_fail``: per gate, share of runs it failed."""

    draws: int
    fail: float
    passed: float
    unresolved: float
    crossed: float
    fraction: float
    stops: np.ndarray
    gate_fail: np.ndarray


def _chunk_stats(rng, m: int, shape: tuple[int, int], rho: float):
    """Exact (mean, sum of squares) of m standardised samples per draw and gate."""
    s, g = shape
    ubar = rng.standard_normal((s, 1)) / math.sqrt(m)
    ssu = rng.chisquare(m - 1, (s, 1))
    ebar = rng.standard_normal((s, g)) / math.sqrt(m)
    x = rng.standard_normal((s, g))
    w = rng.chisquare(m - 2, (s, g)) if m > 2 else np.zeros((s, g))
    mean = math.sqrt(rho) * ubar + math.sqrt(1.0 - rho) * ebar
    ss = (np.sqrt(rho * ssu) + math.sqrt(1.0 - rho) * x) ** 2 + (1.0 - rho) * w
    return mean, ss


def sample_paths(
    sizes: Sequence[int], n_gates: int, rho: float, draws: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Standardised per-sample data (SD 1, mean 0) summarised per look: the sample mean and
    the estimated SE of the mean on the samples used, each ``(looks, draws, gates)``."""
    if not 0.0 <= rho <= 1.0:
        raise ValueError(f"rho must be in [0, 1], got {rho}")
    looks = len(sizes)
    means = np.empty((looks, draws, n_gates))
    ses = np.empty((looks, draws, n_gates))
    n, mean, ss = 0, np.zeros((draws, n_gates)), np.zeros((draws, n_gates))
    for k, size in enumerate(sizes):
        m = size - n
        if m < 2:
            raise ValueError(f"each look needs at least 2 new samples, got {sizes}")
        cm, css = _chunk_stats(rng, m, (draws, n_gates), rho)
        d = cm - mean
        tot = n + m
        mean = mean + d * (m / tot)
        ss = ss + css + d * d * (n * m / tot)
        n = tot
        means[k], ses[k] = mean, np.sqrt(ss / (n - 1) / n)
    return means, ses


def simulate_design(
    design: Design,
    gates: Sequence[GateDesign],
    *,
    change: float | Sequence[float] = 0.0,
    rho: float = 0.0,
    draws: int = 20_000,
    seed: int = 0,
    data: bool = True,
    block: int = 4_000,
) -> SimResult:
    """``draws`` runs of ``design`` over ``gates`` with true changes ``change`` (worse way
    positive, figure units; one per gate or one for all) and correlation ``rho`` between the
    gates' per-sample differences. ``data``: SEs estimated from the samples (else planned)."""
    rng = np.random.default_rng(seed)
    g = len(gates)
    delta = np.broadcast_to(np.asarray(change, dtype=float), (g,))
    root_n = math.sqrt(design.sizes[-1])
    sigma = np.array([x.se_full * root_n for x in gates])
    t = np.asarray(design.fractions)
    K = design.looks
    counts = dict(fail=0, passed=0, unresolved=0, crossed=0)
    used, stops, gate_fail = 0.0, np.zeros(K, int), np.zeros(g)
    done_draws = 0
    while done_draws < draws:
        s = min(block, draws - done_draws)
        if data:
            zm, zse = sample_paths(design.sizes, g, rho, s, rng)
        else:
            inc = rng.standard_normal((K, s, 1)) * math.sqrt(rho) + rng.standard_normal(
                (K, s, g)
            ) * math.sqrt(1.0 - rho)
            dt = np.diff(t, prepend=0.0)[:, None, None]
            zm = np.cumsum(inc * np.sqrt(dt), axis=0) / t[:, None, None] / root_n
            zse = np.broadcast_to(1.0 / np.sqrt(t * design.sizes[-1])[:, None, None], zm.shape)
        running = np.ones(s, bool)
        crossed = np.zeros(s, bool)
        for k in range(K):
            worse = delta + sigma * zm[k]
            n = design.sizes[k] if data and design.studentize else None
            code = states(gates, k + 1, worse, sigma * zse[k], n)
            fails = code == 1
            crossed |= fails.any(axis=1)
            fail_run = running & fails.any(axis=1)
            pass_run = running & (code == 2).all(axis=1)
            stop = fail_run | pass_run if k < K - 1 else running
            gate_fail += (fails & running[:, None]).sum(axis=0)
            counts["fail"] += int(fail_run.sum())
            counts["passed"] += int(pass_run.sum())
            if k == K - 1:
                counts["unresolved"] += int((running & ~fail_run & ~pass_run).sum())
            stops[k] += int(stop.sum())
            used += float(stop.sum()) * t[k]
            running &= ~stop
        counts["crossed"] += int(crossed.sum())
        done_draws += s
    shares = (counts[k] / draws for k in ("fail", "passed", "unresolved", "crossed"))
    return SimResult(draws, *shares, used / draws, stops, gate_fail / draws)


def run_shares(
    design: Design, gates: Sequence[GateDesign], rho: float, *, draws: int = 2_000, seed: int = 0
) -> tuple[float, float]:
    """Mean share of forward passes of a run under no change and with every gate at its
    MDR_P (planned SEs), for :func:`benchc.gates.design.schedule_lines`."""
    null = simulate_design(design, gates, rho=rho, draws=draws, seed=seed, data=False)
    alt = simulate_design(
        design, gates, change=[x.mdr_p for x in gates], rho=rho, draws=draws, seed=seed,
        data=False,
    )  # fmt: skip
    return null.fraction, alt.fraction


__all__ = ["SimResult", "run_shares", "sample_paths", "simulate_design"]
