"""Sequential gates (``--looks``): what each way of spending the budget over looks costs.

Everything is computed in this run, from :mod:`benchc.gates.spending` (exact recursive
integration) and :mod:`benchc.gates.seqsim` (Monte Carlo of paired per-sample data, SEs
estimated from the samples used):

1. one paired gate, one-sided 2.5 %, 90 % power: maximum and expected sample size relative to
   a fixed design of equal power, for Bonferroni over looks (today's ``--looks``), Lan-DeMets
   Pocock and O'Brien-Fleming (efficacy only), and OBF with OBF-type beta-spending futility
   (the new design; its expected size under no change is what early PASS saves);
2. power at the same maximum n (the fixed design's MDR_90), OBF alpha and beta spending;
3. expected share of forward passes of a run under no change and with one gate at its MDR_90
   (each gate at its weighted-Bonferroni share of a 1 % budget over 130 gates, 1000 samples);
4. the family-wise false-alarm rate over 130 gates (budget 1 %), plug-in z against Student-t
   bounds (``Design(studentize=True)``).

    python benchmarks/sequential_design.py              # docs/guides/sequential.md (~80 s)
    python benchmarks/sequential_design.py --draws 4000 # a smoke run
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import ndtri

from benchc.gates.budget import ErrorBudget
from benchc.gates.design import Design
from benchc.gates.seqsim import simulate_design
from benchc.gates.spending import (
    efficacy_bounds,
    expected_fraction,
    futility_bounds,
    power,
    solve_drift,
)

ALPHA, POWER = 0.025, 0.9
N = 1000
GATES = 130
LEVELS = {"model": 10, "family": 20, "cell": 100}


def _sizes(looks: int) -> list[str]:
    t = np.arange(1, looks + 1) / looks
    fixed = float(-ndtri(ALPHA) + ndtri(POWER))
    rows = []
    designs = {
        "Bonferroni over looks (today)": (np.full(looks, -ndtri(ALPHA / looks)), False, "obf"),
        "Pocock (Lan-DeMets)": (efficacy_bounds(t, ALPHA, "pocock"), False, "obf"),
        "O'Brien-Fleming (Lan-DeMets)": (efficacy_bounds(t, ALPHA, "obf"), False, "obf"),
        "OBF + OBF beta-spending futility": (efficacy_bounds(t, ALPHA, "obf"), True, "obf"),
    }
    for name, (c, fut, beta) in designs.items():
        theta = solve_drift(t, c, POWER, beta, futility=fut)
        a = futility_bounds(t, c, 1 - POWER, theta, beta) if fut else None
        r = (theta / fixed) ** 2
        e1 = r * expected_fraction(t, c, a, theta)
        e0 = r * expected_fraction(t, c, a, 0.0)
        rows.append(f"| {looks} | {name} | {r:.3f} | {e1:.3f} | {e0:.3f} |")
    return rows


def _power_rows(draws: int) -> list[str]:
    rows = []
    for looks in (1, 3, 5):
        d = Design.evenly(N, looks)
        g = d.gate(ALPHA, 1.0 / np.sqrt(N))
        exact = power(d.fractions, g.mdr.efficacy, g.fixed_mdr_p / g.se_full, g.mdr.futility)
        free = power(d.fractions, g.mdr.efficacy, g.fixed_mdr_p / g.se_full)
        sim = simulate_design(d, [g], change=g.fixed_mdr_p, draws=draws, seed=looks)
        rows.append(
            f"| {looks} | {exact:.4f} | {sim.fail:.4f} | {free:.4f} | "
            f"{g.mdr_p / g.fixed_mdr_p:.4f} |"
        )
    return rows


def _share_rows(draws: int) -> list[str]:
    rows = []
    for looks in (3, 5):
        d = Design.evenly(N, looks)
        g = d.gate(0.01 / GATES, 1.0 / np.sqrt(N))
        for gates, rho in ((1, 0.0), (GATES, 0.5), (GATES, 0.0)):
            null = simulate_design(d, [g] * gates, rho=rho, draws=draws, seed=gates + looks)
            change = [g.mdr_p] + [0.0] * (gates - 1)
            alt = simulate_design(d, [g] * gates, change=change, rho=rho, draws=draws, seed=7)
            exact = ""
            if gates == 1:
                e0 = expected_fraction(d.fractions, g.mdr.efficacy, g.mdr.futility, 0.0)
                exact = f" (exact {e0:.3f})"
            rows.append(
                f"| {looks} | {gates} | {rho} | {null.fraction:.3f}{exact} | {null.passed:.3f} | "
                f"{alt.fraction:.3f} | {alt.gate_fail[0]:.3f} |"
            )
    return rows


def _alarm_rows(draws: int) -> list[str]:
    budget = ErrorBudget(0.01, LEVELS)
    rows = []
    for looks, spending in ((1, "obf"), (3, "obf"), (3, "pocock"), (5, "obf"), (5, "pocock")):
        for rho in (0.0, 0.5):
            out = []
            for studentize in (False, True):
                d = Design.evenly(N, looks, spending=spending, studentize=studentize)
                gates = [d.gate(budget.alpha_for(lv), 0.03) for lv, k in LEVELS.items()
                         for _ in range(k)]  # fmt: skip
                sim = simulate_design(d, gates, rho=rho, draws=draws, seed=looks * 10)
                out.append(f"{sim.crossed:.4f}")
            rows.append(f"| {looks} | {spending} | {rho} | {out[0]} | {out[1]} |")
    return rows


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draws", type=int, default=20_000, help="Monte Carlo runs per row")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    print("## 1. One paired gate (one-sided 2.5 %, 90 % power): n relative to the fixed design")
    print("| looks | boundaries | max n | expected n, real effect | expected n, no change |")
    print("|---|---|---|---|---|")
    for looks in (3, 5):
        print("\n".join(_sizes(looks)))
    print("\n## 2. Power at the fixed design's MDR_90, same max n (OBF alpha + beta spending)")
    print(f"({args.draws} runs of {N} paired samples per row, SE estimated from the samples)")
    print("| looks | power (exact) | power (simulated) | futility ignored | MDR_90 / fixed |")
    print("|---|---|---|---|---|")
    print("\n".join(_power_rows(args.draws)))
    print(f"\n## 3. Forward passes, share of the fixed design's ({N} samples; alpha 0.01/{GATES})")
    print("| looks | gates | rho | no change | PASS early or at last | one gate at MDR_90 | "
          "that gate FAILs |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    print("\n".join(_share_rows(args.draws)))
    print(f"\n## 4. Family-wise false alarms, {GATES} gates, budget 0.01 (every look run)")
    print("| looks | spending | rho | plug-in z | Student-t |")
    print("|---|---|---|---|---|")
    print("\n".join(_alarm_rows(args.draws)))
    print(f"\n({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
