"""Correctness states and Eqs. 12-16, the Mixed-cell rate, and severity trajectories."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchc.metrics import (
    TRAJECTORIES,
    class_conditioned_mean,
    mixed_cell_rate,
    state_attribution,
    state_codes,
    trajectory_classes,
)


@st.composite
def state_grid(draw):
    n = draw(st.integers(1, 8))
    d = draw(st.integers(1, 3))
    clean = draw(hnp.arrays(bool, (n,)))
    corrupt = draw(hnp.arrays(bool, (n, d, 5)))
    values = draw(hnp.arrays(np.float64, (n, d, 5), elements=st.floats(-2, 1)))
    return clean, corrupt, values


@given(state_grid())
def test_shares_sum_to_one_and_alpha_rows_sum_to_one(g):
    clean, corrupt, values = g
    a = state_attribution(clean, corrupt, values)
    assert (a.count.sum(axis=0) == clean.shape[0]).all()
    np.testing.assert_allclose(a.share.sum(axis=0), 1.0)
    np.testing.assert_allclose(a.pi.sum(axis=0), 1.0)
    for src, rows in ((0, slice(0, 2)), (1, slice(2, 4))):
        has = a.count[rows].sum(axis=0) > 0
        np.testing.assert_allclose(a.alpha[rows].sum(axis=0)[has], 1.0)
        assert np.isnan(a.alpha[rows][:, ~has]).all()
        assert np.isnan(a.source[src][~has]).all()


@given(state_grid())
def test_eq16_aggregate_equals_plain_mean_of_pairs(g):
    clean, corrupt, values = g
    a = state_attribution(clean, corrupt, values)
    np.testing.assert_allclose(a.aggregate, values.mean(axis=0), atol=1e-12)
    # Eq. 15: source effect is the plain mean over that source's samples
    for src, mask in ((0, clean), (1, ~clean)):
        if mask.any():
            np.testing.assert_allclose(a.source[src], values[mask].mean(axis=0), atol=1e-12)


def test_states_by_hand_with_empty_state_and_invalid_pair():
    clean = np.array([True, True, False, False, True])
    corrupt = np.array([True, False, True, False, True])[:, None]
    values = np.array([0.1, -0.7, 0.5, -0.1, 0.3])[:, None]
    valid = np.array([True, True, True, True, False])[:, None]
    assert state_codes(clean, corrupt)[:, 0].tolist() == [0, 1, 2, 3, 0]
    a = state_attribution(clean, corrupt, values, valid)
    assert a.count[:, 0].tolist() == [1, 1, 1, 1]
    np.testing.assert_allclose(a.mean[:, 0], [0.1, -0.7, 0.5, -0.1])
    np.testing.assert_allclose(a.alpha[:, 0], [0.5, 0.5, 0.5, 0.5])
    np.testing.assert_allclose(a.source[:, 0], [-0.3, 0.2])
    np.testing.assert_allclose(a.aggregate[0], -0.05)
    # drop the cw pair: cw is empty (mean NaN, alpha 0) but R_c is still defined
    valid[1] = False
    a = state_attribution(clean, corrupt, values, valid)
    assert np.isnan(a.mean[1, 0]) and a.alpha[1, 0] == 0
    np.testing.assert_allclose(a.source[:, 0], [0.1, 0.2])


def test_no_clean_correct_sample_leaves_r_c_undefined_not_zero():
    clean = np.zeros(3, dtype=bool)
    corrupt = np.array([[True, False], [False, False], [True, True]])
    values = np.array([[0.4, -0.1], [0.0, 0.2], [0.3, 0.1]])
    a = state_attribution(clean, corrupt, values)
    assert np.isnan(a.source[0]).all() and np.isnan(a.mean[:2]).all()
    assert (a.pi[0] == 0).all() and np.isnan(a.alpha[:2]).all()
    np.testing.assert_allclose(a.source[1], values.mean(axis=0))
    np.testing.assert_allclose(a.aggregate, values.mean(axis=0))


def test_mixed_cell_rate():
    r_c = np.array([[-0.2, -0.1, 0.1], [np.nan, -0.3, -0.1]])
    r_w = np.array([[0.1, -0.1, 0.2], [0.5, np.nan, 0.0]])
    # defined cells: 4; mixed: (0,0) only
    assert mixed_cell_rate(r_c, r_w) == pytest.approx(25.0)
    assert np.isnan(mixed_cell_rate(np.full(3, np.nan), np.zeros(3)))


def test_a_cell_r_within_1e6_of_zero_has_no_sign():
    # docs/spec.md §4: R_c -4.5e-6 / R_w +4e-7 is float32 noise around 0, not a mixed cell (the
    # report showed 100.0 next to R_c -0.000 and R_w 0.000); beyond 1e-6 both ways it is
    r_c = np.array([-4.5e-6, -2e-6, -0.2, -5e-7])
    r_w = np.array([4e-7, 2e-6, 0.1, 0.3])
    assert mixed_cell_rate(r_c, r_w) == pytest.approx(50.0)
    assert mixed_cell_rate(r_c[:1], r_w[:1]) == 0.0
    # the bootstrap replicates (cells on the last axis) read the same rule
    from benchc.metrics.figures import _mixed

    reps = _mixed({"r_c": np.stack([r_c, r_c[::-1]]), "r_w": np.stack([r_w, r_w[::-1]])})
    np.testing.assert_allclose(reps, [50.0, 50.0])


def test_trajectories_non_monotone_paths_by_hand():
    clean = np.array([True, True, True, True, False, False, False, False])
    paths = np.array(
        [
            [1, 1, 1, 1, 1],  # always correct
            [1, 0, 1, 1, 1],  # wrong then correct again: transient loss
            [1, 1, 0, 0, 0],  # persistent loss
            [0, 1, 0, 1, 0],  # oscillating, ends wrong: transient loss
            [0, 0, 0, 0, 0],  # always wrong
            [0, 1, 0, 0, 0],  # transient correction
            [0, 0, 1, 1, 1],  # persistent correction
            [1, 0, 1, 0, 1],  # oscillating, ends correct: transient correction
        ],
        dtype=bool,
    )[:, None, :]
    codes = trajectory_classes(clean, paths)[:, 0]
    names = [TRAJECTORIES[c] for c in codes]
    assert names == [
        "always_correct",
        "transient_loss",
        "persistent_loss",
        "transient_loss",
        "always_wrong",
        "transient_correction",
        "persistent_correction",
        "transient_correction",
    ]
    valid = np.ones_like(paths)
    valid[2, 0, 4] = False
    assert trajectory_classes(clean, paths, valid)[2, 0] == -1


@given(hnp.arrays(bool, (6,)), hnp.arrays(bool, (6, 3, 5)))
def test_trajectory_classes_partition_the_sample_corruption_pairs(clean, corrupt):
    codes = trajectory_classes(clean, corrupt)
    assert codes.shape == (6, 3)
    assert ((codes >= 0) & (codes < len(TRAJECTORIES))).all()
    # clean-correct trajectories get classes 0-2, clean-wrong 3-5: every pair in exactly one
    assert ((codes < 3) == clean[:, None]).all()
    counts = np.bincount(codes.ravel(), minlength=6)
    assert counts.sum() == 18


def test_class_conditioned_mean_averages_pairs_then_members():
    codes = np.array([[0, 2], [2, -1]])
    values = np.arange(20, dtype=float).reshape(2, 2, 5)
    out = class_conditioned_mean(codes, values)
    assert out[0] == pytest.approx(2.0)
    assert out[2] == pytest.approx((7.0 + 12.0) / 2)
    assert np.isnan(out[1]) and np.isnan(out[5])


def test_trajectory_shape_errors():
    with pytest.raises(ValueError, match=r"\(N, D, L\)"):
        trajectory_classes(np.ones(3, bool), np.ones((3, 5), bool))
