"""RAS (Eq. 11), its sign regimes (Table IV) and the four regimes of Fig. 4 by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchc.metrics import REGIMES, compute_grid, ras, regime_table, sign_regime

unit = st.floats(-1, 1, allow_nan=False)


@given(unit, unit)
def test_ras_range_and_no_penalty_when_signs_agree(ds, dc):
    r = float(ras(np.array(ds), np.array(dc)))
    assert -2 <= r <= 1
    if ds * dc >= 0:  # dC and dS share a sign (or one is zero): only the main term remains
        assert r == pytest.approx(-dc, abs=1e-12)
    else:
        assert r == pytest.approx(-dc - abs(ds) * abs(dc), abs=1e-12)


@given(hnp.arrays(np.float64, (3, 4), elements=st.floats(-20, 20)), st.integers(0, 3))
def test_ras_is_zero_when_clean_and_corrupted_distributions_are_equal(x, y):
    g = compute_grid(x, np.repeat(x[:, None, None, :], 2, axis=1), np.full(3, y))
    assert (g.ras == 0).all() and (g.d_s == 0).all() and (g.d_c == 0).all()
    assert (g.regime == REGIMES.index("boundary")).all()


def _pair(p_clean, p_corrupt, y=0):
    """Grid of one sample and one condition from explicit probabilities (logits = log p)."""
    lc = np.log(np.array([p_clean], dtype=np.float64))
    lx = np.log(np.array(p_corrupt, dtype=np.float64)).reshape(1, 1, 1, -1)
    return compute_grid(lc, lx, np.array([y]))


def _s(p):
    return -sum(v * math.log(v) for v in p if v > 0) / math.log(len(p))


@pytest.mark.parametrize(
    ("name", "clean", "corrupt", "d_c"),
    [
        # correct -> still correct but flatter: alignment worsens with flatter p
        ("worse_flatter", [0.7, 0.1, 0.1, 0.1], [0.4, 0.2, 0.2, 0.2], 0.6 - 0.3),
        # correct -> confidently wrong: overconfident degradation
        ("worse_sharper", [0.4, 0.3, 0.2, 0.1], [0.05, 0.9, 0.03, 0.02], 0.9 - 0.6),
        # confidently wrong -> correct via a flat tie at the lowest index: hesitant support
        ("better_flatter", [0.1, 0.8, 0.05, 0.05], [0.3, 0.3, 0.2, 0.2], 0.7 - 0.8),
        # correct -> correct and sharper: supported improvement
        ("better_sharper", [0.4, 0.3, 0.2, 0.1], [0.9, 0.05, 0.03, 0.02], 0.1 - 0.6),
    ],
)
def test_four_regimes_of_fig4_by_hand(name, clean, corrupt, d_c):
    g = _pair(clean, corrupt)
    d_s = _s(corrupt) - _s(clean)
    pos = lambda v: max(v, 0.0)  # noqa: E731
    expected = -d_c - pos(d_c) * pos(-d_s) - pos(d_s) * pos(-d_c)
    assert g.d_c[0, 0, 0] == pytest.approx(d_c, abs=1e-6)
    assert g.d_s[0, 0, 0] == pytest.approx(d_s, abs=1e-6)
    assert g.ras[0, 0, 0] == pytest.approx(expected, abs=1e-6)
    assert REGIMES[g.regime[0, 0, 0]] == name


def test_overconfident_degradation_is_penalised_beyond_the_alignment_shift():
    g = _pair([0.4, 0.3, 0.2, 0.1], [0.05, 0.9, 0.03, 0.02])
    assert g.ras[0, 0, 0] < -g.d_c[0, 0, 0]


def test_one_hot_correct_to_one_hot_wrong_hits_the_floor_of_the_alignment_term():
    lc = np.array([[0.0, -300.0]])
    lx = np.array([-300.0, 0.0]).reshape(1, 1, 1, 2)
    g = compute_grid(lc, lx, np.array([0]))
    # C goes 0 -> 1, S stays 0: RAS = -1, no penalty (dS = 0)
    assert g.d_c[0, 0, 0] == pytest.approx(1.0) and g.d_s[0, 0, 0] == pytest.approx(0.0)
    assert g.ras[0, 0, 0] == pytest.approx(-1.0)


def test_sign_regime_boundary_and_nan():
    ds = np.array([0.5, -0.5, 0.5, -0.5, 1e-7, 0.2, np.nan])
    dc = np.array([0.5, 0.5, -0.5, -0.5, 0.3, -5e-7, 0.1])
    assert sign_regime(ds, dc).tolist() == [0, 1, 2, 3, 4, 4, -1]


def test_regime_table_means_and_shares():
    ds = np.array([0.2, 0.4, -0.1, 0.0, np.nan])
    dc = np.array([0.1, 0.3, 0.2, 0.5, 0.1])
    t = regime_table(ds, dc)
    assert t.count.tolist() == [2, 1, 0, 0, 1]
    np.testing.assert_allclose(t.share, [0.5, 0.25, 0, 0, 0.25])
    np.testing.assert_allclose(t.mean_dc[:2], [0.2, 0.2])
    np.testing.assert_allclose(t.mean_ras[1], -0.2 - 0.2 * 0.1)
    assert np.isnan(t.mean_ras[2]) and np.isnan(t.mean_ds[3])
