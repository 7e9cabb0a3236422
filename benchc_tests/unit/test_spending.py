"""Group-sequential boundaries (benchc.gates.spending), the design's decisions
(benchc.gates.design) and the Monte Carlo's data generator (benchc.gates.seqsim).

The boundaries are checked three independent ways: published values, scipy's multivariate
normal CDF, and Brownian paths drawn directly. The simulations of the whole design (false
alarms over 130 gates, power, forward passes) are the ``-m sequential`` tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats
from scipy.special import ndtr, ndtri

from benchc.gates.budget import ErrorBudget
from benchc.gates.design import FAIL, FUTILE, UNRESOLVED, Design, schedule_lines
from benchc.gates.seqsim import sample_paths, simulate_design
from benchc.gates.spending import (
    SPENDING,
    crossing,
    efficacy_bounds,
    expected_fraction,
    futility_bounds,
    mdr_p,
    obrien_fleming,
    pocock,
    power,
    solve_drift,
)

T5 = np.arange(1, 6) / 5
#: Lan-DeMets O'Brien-Fleming type, one-sided 0.025, 5 equally spaced looks (Jennison & Turnbull
#: 2000, Table 7.? / gsDesign ``sfLDOF``) and Pocock type (``sfLDPocock``).
OBF_5 = [4.877, 3.357, 2.680, 2.290, 2.031]
POCOCK_5 = [2.438, 2.427, 2.410, 2.397, 2.386]
Z_FIXED = float(-ndtri(0.025) - ndtri(0.1))  # fixed design's drift at 90 % power


def _brownian_z(fractions, draws: int, drift: float, seed: int) -> np.ndarray:
    """Z_k of Brownian motion with drift, drawn directly: (draws, looks)."""
    t = np.asarray(fractions)
    rng = np.random.default_rng(seed)
    inc = rng.standard_normal((draws, t.size)) * np.sqrt(np.diff(t, prepend=0.0))
    s = np.cumsum(inc, axis=1) + drift * t
    return s / np.sqrt(t)


@pytest.mark.parametrize("alpha", [0.5, 0.025, 0.01, 1e-4, 7.692307692307693e-05, 1e-9])
@pytest.mark.parametrize("spending", sorted(SPENDING))
def test_one_look_is_the_fixed_design_bit_for_bit(alpha: float, spending: str) -> None:
    (c,) = efficacy_bounds([1.0], alpha, spending)
    assert c == -ndtri(alpha)
    budget = ErrorBudget(0.01, {"model": 4, "cell": 9})
    assert efficacy_bounds([1.0], budget.alpha_for("model"), spending)[0] == budget.z("model")
    gate = Design((500,), spending=spending).gate(alpha, se_full=0.01, floor=0.0)
    assert gate.mdr_p == pytest.approx(gate.fixed_mdr_p, rel=1e-15)  # (c + z) SE vs c SE + z SE
    assert gate.mdr.futility[0] == c


def test_published_boundaries() -> None:
    np.testing.assert_allclose(efficacy_bounds(T5, 0.025, "obf"), OBF_5, atol=6e-4)
    np.testing.assert_allclose(efficacy_bounds(T5, 0.025, "pocock"), POCOCK_5, atol=6e-4)


@pytest.mark.parametrize("spending", sorted(SPENDING))
def test_boundaries_against_scipy_multivariate_normal(spending: str) -> None:
    """P(no crossing by look k) = 1 - alpha(t_k): the joint normal CDF with corr sqrt(t_i/t_j)."""
    t = np.array([0.3, 0.65, 1.0])
    c = efficacy_bounds(t, 0.025, spending)
    cum = SPENDING[spending](t, 0.025)
    for k in range(1, 4):
        corr = np.sqrt(np.minimum.outer(t[:k], t[:k]) / np.maximum.outer(t[:k], t[:k]))
        # Genz's quasi-Monte Carlo to 1e-7, far inside the tolerance (scipy 1.15, the lowest
        # supported, takes the accuracy on cdf, not on the frozen distribution)
        cdf = stats.multivariate_normal.cdf(c[:k], np.zeros(k), corr, abseps=1e-7, releps=1e-7)
        assert cdf == pytest.approx(1 - cum[k - 1], abs=2e-5)


@pytest.mark.parametrize("spending", sorted(SPENDING))
def test_crossing_probability_under_no_change_is_the_spent_alpha(spending: str) -> None:
    """Brownian paths drawn directly (400 000): the share crossed by each look is alpha(t_k)."""
    alpha, draws = 0.025, 400_000
    c = efficacy_bounds(T5, alpha, spending)
    z = _brownian_z(T5, draws, 0.0, seed=3)
    crossed = np.cumsum(z > c, axis=1) > 0
    target = SPENDING[spending](T5, alpha)
    se = np.sqrt(target * (1 - target) / draws)
    assert np.all(np.abs(crossed.mean(axis=0) - target) < 4 * se + 1e-6)
    up, _ = crossing(T5, c, None, 0.0)
    np.testing.assert_allclose(np.cumsum(up), target, rtol=1e-7)


@given(
    a1=st.floats(1e-7, 0.2),
    ratio=st.floats(1.01, 4.0),
    k=st.integers(2, 6),
    spending=st.sampled_from(sorted(SPENDING)),
)
def test_bounds_fall_as_alpha_rises(a1: float, ratio: float, k: int, spending: str) -> None:
    t = np.arange(1, k + 1) / k
    lo, hi = efficacy_bounds(t, a1, spending), efficacy_bounds(t, min(a1 * ratio, 0.45), spending)
    assert np.all(hi < lo)
    up, _ = crossing(t, lo, None, 0.0)  # the exact integration agrees with itself
    np.testing.assert_allclose(np.cumsum(up), SPENDING[spending](t, a1), rtol=1e-6)


@given(
    t=st.lists(st.floats(0.01, 0.99), min_size=1, max_size=8, unique=True),
    alpha=st.floats(1e-9, 0.5),
    spending=st.sampled_from(sorted(SPENDING)),
)
def test_spending_rises_to_alpha(t: list[float], alpha: float, spending: str) -> None:
    f = SPENDING[spending]
    x = np.sort(np.array([*t, 1.0]))
    y = f(x, alpha)
    apart = np.diff(x) > 1e-6
    assert np.all(np.diff(y)[apart] > 0) and np.all(np.diff(y) >= 0) and np.all(y <= alpha)
    assert f(1.0, alpha) == alpha and f(0.0, alpha) == 0.0


def test_spending_functions_formulas() -> None:
    assert obrien_fleming(0.25, 0.025) == pytest.approx(2 * ndtr(ndtri(0.0125) / 0.5))
    assert pocock(0.5, 0.025) == pytest.approx(0.025 * math.log(1 + (math.e - 1) / 2))


@pytest.mark.parametrize("looks", [2, 3, 5])
@pytest.mark.parametrize("alpha", [0.025, 0.01 / 130])
def test_futility_bounds(looks: int, alpha: float) -> None:
    t = np.arange(1, looks + 1) / looks
    c = efficacy_bounds(t, alpha)
    theta = solve_drift(t, c, 0.9)
    a = futility_bounds(t, c, 0.1, theta)
    assert np.all(a <= c) and a[-1] == c[-1]
    assert np.all(np.diff(a) > 0)
    _, down = crossing(t, c, a, theta)  # beta spent per look as the spending function says
    np.testing.assert_allclose(np.cumsum(down)[:-1], obrien_fleming(t, 0.1)[:-1], rtol=1e-6)
    assert power(t, c, theta, a) == pytest.approx(0.9, abs=1e-7)
    assert power(t, c, theta) > 0.9  # non-binding: ignoring them only adds power
    lower = futility_bounds(t, c, 0.1, theta - 0.5)
    assert np.all(lower[:-1] < a[:-1])


def test_power_against_brownian_paths() -> None:
    t = np.array([1 / 3, 2 / 3, 1.0])
    c = efficacy_bounds(t, 0.025)
    a = futility_bounds(t, c, 0.1, Z_FIXED)
    z = _brownian_z(t, 200_000, Z_FIXED, seed=5)
    up, down = z > c, z < a
    first = np.argmax(up | down, axis=1)
    sim = np.mean(up[np.arange(len(z)), first])
    assert sim == pytest.approx(power(t, c, Z_FIXED, a), abs=4 * math.sqrt(0.1 * 0.9 / len(z)))
    stop = np.where((up | down).any(axis=1), first, 2)
    assert np.mean(t[stop]) == pytest.approx(expected_fraction(t, c, a, Z_FIXED), abs=3e-3)


@pytest.mark.parametrize(("looks", "least"), [(3, 0.88), (5, 0.87)])
def test_power_at_the_fixed_designs_mdr(looks: int, least: float) -> None:
    """At the fixed design's MDR_90 and the same maximum n, with OBF-type alpha and beta
    spending, a single gate (one-sided 2.5 %) keeps 88.3 % power at 3 looks (>= fixed - 2
    points) and 87.1 % at 5 (the issue's 88.3 and 87.0); the design's own MDR_90 is 2.9 % and
    4.9 % larger."""
    d = Design.evenly(1000, looks)
    g = d.gate(0.025, se_full=1.0)
    got = power(d.fractions, g.mdr.efficacy, g.fixed_mdr_p, g.mdr.futility)
    assert least <= got < 0.9
    assert power(d.fractions, g.mdr.efficacy, g.mdr_p, g.mdr.futility) == pytest.approx(0.9)
    assert 1.0 < g.mdr_p / g.fixed_mdr_p < 1.05


def test_mdr_p_with_a_floor_and_room() -> None:
    t = T5
    c = efficacy_bounds(t, 0.001)
    plain = mdr_p(t, c, 0.01)
    floored = mdr_p(t, c, 0.01, floor=0.05)  # floor above every c_k SE_k
    assert floored.value > plain.value and floored.value > 0.05
    assert np.all(floored.efficacy >= c) and floored.efficacy[-1] == pytest.approx(5.0)
    assert power(t, floored.efficacy, floored.drift, floored.futility) == pytest.approx(0.9)
    one = mdr_p([1.0], efficacy_bounds([1.0], 0.001), 0.01, floor=0.05)
    assert one.value == pytest.approx(0.05 + ndtri(0.9) * 0.01, rel=1e-12)
    assert mdr_p(t, c, 0.0, floor=0.02).value == 0.02
    stuck = mdr_p(t, c, 0.01, floor=0.2, room=0.1)
    assert not stuck.reachable and "floor 0.2 exceeds" in stuck.reason
    short = mdr_p(t, c, 0.01, room=plain.value * 0.9)
    assert not short.reachable and "MDR_90%" in short.reason
    assert mdr_p(t, c, 0.01, room=plain.value * 1.1).reachable


def test_bad_inputs() -> None:
    with pytest.raises(ValueError):
        efficacy_bounds([0.5, 0.4, 1.0], 0.025)
    with pytest.raises(ValueError):
        efficacy_bounds([0.5, 0.9], 0.025)
    with pytest.raises(ValueError):
        Design((100, 100, 200))
    with pytest.raises(ValueError):
        Design((100, 200), spending="haybittle")


def test_design_decisions() -> None:
    d = Design.evenly(1000, 5)
    assert d.sizes == (200, 400, 600, 800, 1000)
    gates = [d.gate(0.01 / 130, se_full=0.01, floor=0.005, name=f"g{i}") for i in range(3)]
    same = d.decide(1, gates, [0.0] * 3, [0.0] * 3)  # a bit-identical candidate
    assert same.verdict == "PASS" and same.states == (FUTILE,) * 3
    assert same.message() == (
        "PASS: this design fails a regression of MDR_90% with probability >= 90%; stopped at "
        "look 1 of 5"
    )
    se2 = gates[0].planned_se(2)
    fail_at = float(gates[0].fail_above(2, se2))
    assert fail_at == pytest.approx(gates[0].efficacy[1] * se2)
    out = d.decide(2, gates, [fail_at * 1.01, 0.0, 0.0], [se2] * 3)
    assert out.verdict == "FAIL" and out.states[0] == FAIL and out.message().startswith("FAIL")
    mid = d.decide(2, gates, [fail_at * 0.99, 0.0, 0.0], [se2] * 3)
    assert mid.verdict == "CONTINUE"
    # last look on the planned SE: a_K = c_K, every gate decides
    se5 = gates[0].planned_se(5)
    edge = float(gates[0].fail_above(5, se5))
    assert float(gates[0].pass_below(5, se5)) == pytest.approx(edge)
    assert d.decide(5, gates, [edge * 0.999] * 3, [se5] * 3).verdict == "PASS"
    assert d.decide(5, gates, [edge] * 3, [se5] * 3).verdict == "PASS"  # not above: PASS
    # a wider SE than planned (samples moved both ways): the last look decides as a fixed gate,
    # a change within the planned bound PASSes, one beyond it but inside this run's wider
    # failing bound is UNRESOLVED, with the samples at which it would fail
    assert d.decide(5, gates, [edge * 0.99] * 3, [2 * se5] * 3).verdict == "PASS"
    wide = d.decide(5, gates, [edge * 1.01, 0.0, 0.0], [2 * se5, se5, se5], n=1000)
    assert wide.verdict == "UNRESOLVED" and wide.states[0] == UNRESOLVED
    need = wide.resolve[0]
    assert need is not None and need > 1000 and wide.resolve[1:] == (None, None)
    later = math.sqrt(1000 / need) * 2 * se5  # that SE on `need` samples decides
    assert d.decide(5, gates[:1], [edge * 1.01], [later]).verdict == "FAIL"


def test_studentized_bounds() -> None:
    """With the samples used, a look's bound is the t quantile of the same tail, and the last
    look still decides on the planned SE; without them, the z bound (the fixed design's)."""
    d = Design.evenly(200, 3, studentize=True)
    g = d.gate(0.001, 0.01)
    assert g.bound(3) == g.efficacy[-1]
    for k, n in enumerate(d.sizes, 1):
        t_bound = g.bound(k, n)
        assert t_bound > g.efficacy[k - 1]
        assert stats.t.sf(t_bound, n - 1) == pytest.approx(ndtr(-g.efficacy[k - 1]), rel=1e-8)
    se = g.planned_se(3)
    assert float(g.pass_below(3, se, 200)) == pytest.approx(float(g.fail_above(3, se, 200)))
    edge = float(g.fail_above(3, se))  # just past the z edge: fails on z, passes on t
    assert Design.evenly(200, 3).decide(3, [g], [edge * 1.001], [se]).verdict == "FAIL"
    assert d.decide(3, [g], [edge * 1.001], [se]).verdict == "PASS"


def test_design_uses_the_samples_actually_used() -> None:
    d = Design((200, 400, 600, 800, 1000))
    got = d.used([180, 410])
    assert got.fractions == (0.18, 0.41, 0.6, 0.8, 1.0)
    assert d.used([180, 410, 600, 800, 950]).fractions[-1] == 1.0
    a = got.gate(0.001, 0.01)
    b = Design((180, 410, 700, 1000)).gate(0.001, 0.01)  # later looks do not move earlier bounds
    np.testing.assert_allclose(a.efficacy[:2], b.efficacy[:2], rtol=1e-12)


def test_schedule_lines() -> None:
    d = Design.evenly(1000, 3)
    g = d.gate(0.01 / 130, se_full=0.01, floor=0.005, name="accuracy in model")
    stuck = d.gate(0.01 / 130, se_full=0.01, floor=0.3, room=0.2, name="gap in vsi")
    lines = schedule_lines(d, [g, stuck], run=[("130 gates, rho 0.5", 0.7, 0.6)])
    text = "\n".join(lines)
    assert "samples per look: 333, 667, 1000" in text
    assert f"MDR_90% {g.mdr_p:.4g} (fixed design: MDR_90% {g.fixed_mdr_p:.4g}" in text
    assert f"today's MDR {g.fixed_mdr:.4g}" in text
    assert "P = 90% is unreachable: the floor 0.3 exceeds" in text
    assert "run (130 gates, rho 0.5): forward passes 0.70" in text
    assert f"FAIL above z {g.efficacy[0]:.3f}" in text


def test_sufficient_statistics_match_literal_samples() -> None:
    """seqsim's exact sufficient statistics against per-sample data drawn literally (two gates,
    correlation 0.5): the same law of each look's mean and SE (KS, 3000 draws each)."""
    sizes, rho, draws = (8, 20, 40), 0.5, 3000
    means, ses = sample_paths(sizes, 2, rho, draws, np.random.default_rng(11))
    rng = np.random.default_rng(12)
    u = rng.standard_normal((draws, sizes[-1], 1))
    x = math.sqrt(rho) * u + math.sqrt(1 - rho) * rng.standard_normal((draws, sizes[-1], 2))
    for k, n in enumerate(sizes):
        lit_mean = x[:, :n].mean(axis=1)
        lit_se = x[:, :n].std(axis=1, ddof=1) / math.sqrt(n)
        for g in range(2):
            assert stats.ks_2samp(means[k, :, g], lit_mean[:, g]).pvalue > 0.001
            assert stats.ks_2samp(ses[k, :, g], lit_se[:, g]).pvalue > 0.001
        r_sim = np.corrcoef(ses[k, :, 0], ses[k, :, 1])[0, 1]
        r_lit = np.corrcoef(lit_se[:, 0], lit_se[:, 1])[0, 1]
        assert r_sim == pytest.approx(r_lit, abs=0.08)


def test_simulated_single_gate_matches_the_integration() -> None:
    d = Design.evenly(1000, 5)
    g = d.gate(0.01 / 130, se_full=0.01)
    sim = simulate_design(d, [g], draws=20_000, seed=2, data=False)
    exact = expected_fraction(d.fractions, g.mdr.efficacy, g.mdr.futility, 0.0)
    assert sim.fraction == pytest.approx(exact, abs=0.01)
    assert sim.fail + sim.passed + sim.unresolved == pytest.approx(1.0)
