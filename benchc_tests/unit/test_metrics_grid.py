"""compute_grid against a plain per-pair reference, plus layout, validity, determinism and
the vectorised bootstrap."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchc import spec
from benchc.metrics import (
    bootstrap_se,
    compute_grid,
    grid_from_logits,
    split_conditions,
)
from benchc.metrics.figures import defined
from benchc.metrics.reference import per_pair_reference


def _random_grid(rng, n=12, d=3, n_sev=5, k_max=5):
    k = rng.integers(2, k_max + 1, n)
    lc = rng.normal(size=(n, k_max)) * 2
    lx = lc[:, None, None, :] + rng.normal(size=(n, d, n_sev, k_max)) * 1.5
    pad = np.arange(k_max) >= k[:, None]
    lc[pad] = np.nan
    lx[np.broadcast_to(pad[:, None, None, :], lx.shape)] = np.nan
    y = np.array([rng.integers(0, ki) for ki in k])
    return lc, lx, y, k


def test_grid_matches_per_pair_reference():
    rng = np.random.default_rng(3)
    lc, lx, y, k = _random_grid(rng)
    g = compute_grid(lc, lx, y)  # K read from the padding
    assert g.n_options.tolist() == k.tolist()
    n, d, n_sev = g.shape
    ref = np.zeros((n, d, n_sev, 6))
    for i in range(n):
        for j in range(d):
            for s in range(n_sev):
                ref[i, j, s] = per_pair_reference(lc[i], lx[i, j, s], int(y[i]), int(k[i]))
    np.testing.assert_allclose(g.d_s, ref[..., 0], atol=2e-6)
    np.testing.assert_allclose(g.d_c, ref[..., 1], atol=2e-6)
    np.testing.assert_allclose(g.ras, ref[..., 2], atol=4e-6)
    assert (g.correct == ref[..., 3].astype(bool)).all()
    assert (g.consistent == ref[..., 4].astype(bool)).all()
    clean_ok = ref[:, 0, 0, 5].astype(bool)
    assert (g.correct_clean == clean_ok).all()
    acc0 = clean_ok.mean()
    acc = ref[..., 3].mean(axis=0)
    np.testing.assert_allclose(g.cell("accuracy"), acc)
    np.testing.assert_allclose(g.cell("d_acc"), acc - acc0)
    np.testing.assert_allclose(g.cell("consistency"), ref[..., 4].mean(axis=0))
    np.testing.assert_allclose(g.cell("relative_robustness"), acc / acc0)
    np.testing.assert_allclose(g.cell("ras"), ref[..., 2].mean(axis=0), atol=4e-6)
    np.testing.assert_allclose(g.cell("r_c"), ref[clean_ok, ..., 2].mean(axis=0), atol=4e-6)
    np.testing.assert_allclose(g.cell("r_w"), ref[~clean_ok, ..., 2].mean(axis=0), atol=4e-6)
    assert g.figure("acc_clean") == pytest.approx(acc0)
    assert g.figure("accuracy") == pytest.approx(acc.mean())
    assert g.figure("d_acc") == pytest.approx(acc.mean() - acc0)
    assert g.figure("relative_robustness") == pytest.approx(acc.mean() / acc0)
    assert g.figure("ras") == pytest.approx(ref[..., 2].mean(), abs=4e-6)
    mixed = 100 * np.mean(
        (ref[clean_ok, ..., 2].mean(0) < -1e-6) & (ref[~clean_ok, ..., 2].mean(0) > 1e-6)
    )
    assert g.figure("mixed_cell_rate") == pytest.approx(mixed)
    np.testing.assert_allclose(g.cell_alpha[0] + g.cell_alpha[1], 1.0)


def test_model_with_no_clean_correct_sample():
    lc = np.array([[0.0, 2.0], [0.0, 3.0]])
    lx = np.stack([np.array([[[2.0, 0.0]], [[0.0, 1.0]]])] * 2)  # (2, 2, 1, 2)
    g = compute_grid(lc, lx, np.array([0, 0]))
    assert g.figure("acc_clean") == 0
    assert (
        np.isnan(g.figure("relative_robustness")) and np.isnan(g.cell("relative_robustness")).all()
    )
    assert np.isnan(g.figure("r_c")) and np.isnan(g.cell("r_c")).all()
    assert np.isnan(g.figure("mixed_cell_rate"))  # no cell has both R_c and R_w
    assert not np.isnan(g.figure("r_w")) and g.cell("accuracy")[:, 0].tolist() == [1.0, 0.0]


def test_stacked_layout_is_clean_then_corruption_major():
    rng = np.random.default_rng(0)
    n, d, n_sev, k = 4, 19, 5, 4
    logits = rng.normal(size=(n, 1 + d * n_sev, k))
    _clean, corrupt = split_conditions(logits)
    assert corrupt.shape == (n, d, n_sev, k)
    keys = spec.all_conditions()
    j = keys.index(spec.condition_key("fog", 3))
    np.testing.assert_array_equal(corrupt[:, spec.CORRUPTIONS.index("fog"), 2], logits[:, 1 + j])
    y = rng.integers(0, k, n)
    g = grid_from_logits(logits, y)
    assert g.corruptions == spec.CORRUPTIONS and g.severities == (1, 2, 3, 4, 5)
    with pytest.raises(ValueError, match=r"1 clean \+ D\*5"):
        split_conditions(logits[:, :-1])


def test_rerun_is_bit_identical_and_arrays_are_read_only():
    rng = np.random.default_rng(1)
    lc, lx, y, _ = _random_grid(rng)
    a, b = compute_grid(lc, lx, y), compute_grid(lc, lx, y)
    for f in ("ras", "d_s", "d_c"):
        assert np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True)
    for f in ("r_c", "ras"):
        assert np.array_equal(a.cell(f), b.cell(f), equal_nan=True)
    fa, fb = a.model_figures(), b.model_figures()
    assert fa.keys() == fb.keys()
    assert all(np.array_equal(fa[k], fb[k], equal_nan=True) for k in fa)
    with pytest.raises(ValueError):
        a.ras[0, 0, 0] = 1.0
    ba, bb = a.bootstrap(50, seed=7), b.bootstrap(50, seed=7)
    assert all(np.array_equal(ba[x], bb[x], equal_nan=True) for x in ba)


def test_invalid_pairs_are_excluded_everywhere():
    rng = np.random.default_rng(2)
    lc, lx, y, _ = _random_grid(rng, n=6, d=2)
    valid = np.ones(lx.shape[:3], dtype=bool)
    valid[1, 0, 2] = False
    lx_bad = lx.copy()
    lx_bad[1, 0, 2] = np.nan  # an unparseable pair
    g = compute_grid(lc, lx_bad, y, valid=valid)
    full = compute_grid(lc, lx, y)
    assert np.isnan(g.ras[1, 0, 2]) and g.regime[1, 0, 2] == -1 and g.pred[1, 0, 2] == -1
    assert np.isnan(g.p_corrupt[1, 0, 2]).all() and not g.correct[1, 0, 2]
    lx_inf = lx.copy()
    lx_inf[1, 0, 2] = np.inf  # garbage in a skipped pair raises nothing, warns nothing
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        same = compute_grid(lc, lx_inf, y, valid=valid)
    assert np.array_equal(same.ras, g.ras, equal_nan=True)
    assert g.cell_n[0, 2] == 5 and g.cell_n[0, 1] == 6
    keep = valid.copy()
    np.testing.assert_allclose(g.cell("ras")[0, 2], full.ras[keep[:, 0, 2], 0, 2].mean())
    assert g.figure("ras") == pytest.approx(full.ras[keep].mean())
    assert g.trajectory_classes()[1, 0] == -1
    with pytest.raises(ValueError, match=r"logits_corrupt\[1, 0, 2, 0\]"):
        compute_grid(lc, lx_bad, y)


@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        ((np.zeros((3, 4)), np.zeros((3, 2, 5)), np.zeros(3, int)), r"\(N, D, L, K_max\)"),
        ((np.zeros((3, 4)), np.zeros((2, 2, 5, 4)), np.zeros(3, int)), r"\(N, D, L, K_max\)"),
        ((np.zeros(4), np.zeros((3, 2, 5, 4)), np.zeros(3, int)), r"logits_clean"),
        ((np.zeros((3, 4)), np.zeros((3, 2, 5, 4)), np.array([0, 4, 0])), r"answers\[1\]"),
        ((np.zeros((3, 4)), np.zeros((3, 2, 5, 4)), np.zeros(2, int)), r"answers"),
    ],
)
def test_bad_grid_input(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        compute_grid(*args)


def test_k_below_two_is_rejected_with_sample_index():
    lc = np.zeros((2, 3))
    lc[1, 1:] = np.nan
    lx = np.zeros((2, 1, 1, 3))
    lx[1, ..., 1:] = np.nan
    with pytest.raises(ValueError, match="sample 1 has K=1"):
        compute_grid(lc, lx, np.zeros(2, int))


def test_vectorised_bootstrap_matches_row_resampling():
    rng = np.random.default_rng(4)
    lc, lx, y, _ = _random_grid(rng, n=15, d=2)
    g = compute_grid(lc, lx, y)
    reps = g.bootstrap(n_boot=40, seed=11)
    model = {f.name for f in defined("grid")}
    assert set(reps) == model | {f"cell_{f.name}" for f in defined("grid", "pair")}
    assert reps["cell_r_c"].shape == (40, 2, 5)

    def refit(rows):
        s = compute_grid(lc[rows], lx[rows], y[rows])
        return np.array(
            [
                s.figure("ras"),
                s.figure("r_c"),
                s.figure("acc_clean"),
                s.figure("mixed_cell_rate"),
                s.cell("r_w")[1, 3],
            ]
        )

    se = bootstrap_se(refit, 15, seed=11, n_boot=40)
    mine = g.standard_errors(n_boot=40, seed=11)
    got = [
        mine["ras"],
        mine["r_c"],
        mine["acc_clean"],
        mine["mixed_cell_rate"],
        mine["cell_r_w"][1, 3],
    ]
    np.testing.assert_allclose(got, se, rtol=1e-9, atol=1e-12)
    assert all(v > 0 for v in got[:3])


@st.composite
def grids(draw):
    n = draw(st.integers(1, 5))
    k_max = draw(st.integers(2, 5))
    k = np.array(draw(st.lists(st.integers(2, k_max), min_size=n, max_size=n)))
    el = st.floats(-20, 20, width=32)
    lc = draw(hnp.arrays(np.float64, (n, k_max), elements=el))
    lx = draw(hnp.arrays(np.float64, (n, 2, 3, k_max), elements=el))
    pad = np.arange(k_max) >= k[:, None]
    lc[pad] = np.nan
    lx[np.broadcast_to(pad[:, None, None, :], lx.shape)] = np.nan
    y = np.array([draw(st.integers(0, int(v) - 1)) for v in k])
    return lc, lx, y


@given(grids())
def test_grid_ranges(data):
    g = compute_grid(*data)
    assert ((g.d_s >= -1) & (g.d_s <= 1)).all() and ((g.d_c >= -1) & (g.d_c <= 1)).all()
    assert ((g.ras >= -2) & (g.ras <= 1)).all()
    assert ((g.s_clean >= 0) & (g.s_clean <= 1)).all() and (
        (g.c_clean >= 0) & (g.c_clean <= 1)
    ).all()
    np.testing.assert_allclose(g.cell("ras"), g.ras.mean(axis=0), atol=1e-12)
    assert g.figure("ras") == pytest.approx(g.ras.mean(), abs=1e-12)


def test_pair_values_average_to_the_cell_figures():
    rng = np.random.default_rng(5)
    lc, lx, y, _ = _random_grid(rng, n=10, d=2)
    valid = rng.random(lx.shape[:3]) > 0.1
    g = compute_grid(lc, lx, y, valid=valid)
    for fig in ("accuracy", "d_acc", "consistency", "ras", "r_c", "r_w", "d_s", "d_c"):
        v = g.pair_values(fig)
        assert v.shape == g.shape and np.isnan(v[~valid]).all()
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_allclose(np.nanmean(v, axis=0), g.cell(fig), atol=1e-12)
    with pytest.raises(ValueError, match="mixed_cell_rate"):
        g.pair_values("mixed_cell_rate")
