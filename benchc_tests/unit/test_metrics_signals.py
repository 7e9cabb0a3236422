"""AUROC, PRR, hybrids, ECE, Brier, Spearman permutation test, and Table VI ranking."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy import stats

from benchc.metrics import (
    auroc_error,
    auroc_vsi,
    brier,
    compute_grid,
    ece,
    prr,
    rank_mismatch,
    rank_table_from_grids,
    spearman_bootstrap_ci,
    spearman_permutation,
    zscore_hybrid,
)
from benchc.metrics.stats import bootstrap_indices


@given(hnp.arrays(bool, st.integers(2, 30)))
def test_auroc_of_a_perfect_score_is_one(errors):
    risk = errors.astype(float) + np.linspace(0, 0.5, errors.size)
    got = auroc_error(errors, risk)
    if errors.all() or not errors.any():
        assert np.isnan(got)
    else:
        assert got == 1.0
        assert auroc_error(errors, -risk) == 0.0


def test_auroc_vsi_uses_negated_vsi():
    errors = np.array([1, 1, 0, 0])
    assert auroc_vsi(errors, np.array([0.01, 0.02, 0.5, 0.9])) == 1.0
    with pytest.raises(ValueError, match=r"errors\[2\]: must be 0/1"):
        auroc_error(np.array([0, 1, 2]), np.zeros(3))
    with pytest.raises(ValueError, match=r"risk\[1\]"):
        auroc_error(np.array([0, 1]), np.array([0.0, np.nan]))


def test_prr_oracle_random_and_inverse():
    errors = np.array([1, 1, 0, 0, 0, 0, 0, 0, 0, 0], bool)  # base risk 0.2, reject 2
    assert prr(errors, errors.astype(float)) == pytest.approx(1.0)
    assert prr(errors, -errors.astype(float)) == pytest.approx(-1.0 * (0.25 - 0.2) / 0.2)
    # rejecting one error and one correct: kept risk 1/8 against the oracle's 0
    assert prr(errors, np.array([9, 0, 8, 0, 0, 0, 0, 0, 0, 0.0])) == pytest.approx(0.075 / 0.2)
    assert np.isnan(prr(np.zeros(10, bool), np.arange(10.0)))


def test_zscore_hybrid_within_cells():
    s = np.array([[1.0, 2.0, 3.0, 10.0, 20.0, 30.0], [3.0, 2.0, 1.0, 0.0, 0.0, 1.0]])
    cells = np.array(["a", "a", "a", "b", "b", "b"])
    h = zscore_hybrid(s, cells)
    z = np.sqrt(1.5)
    np.testing.assert_allclose(h[:3], [0, 0, 0], atol=1e-12)  # components cancel in cell a
    np.testing.assert_allclose(h[3:], [-z - 1 / np.sqrt(2), 0 - 1 / np.sqrt(2), z + np.sqrt(2)])
    # a constant component has no z-score: hybrid undefined in that cell only
    s2 = s.copy()
    s2[1, :3] = 5.0
    h2 = zscore_hybrid(s2, cells)
    assert np.isnan(h2[:3]).all() and np.isfinite(h2[3:]).all()
    with pytest.raises(ValueError, match=r"cells: expected shape \(6,\)"):
        zscore_hybrid(s, cells[:5])


def test_ece_and_brier_by_hand():
    conf = np.array([0.95, 0.95, 0.15, 0.15, 1.0])
    correct = np.array([1, 0, 0, 0, 1])
    # bin 9: conf .95,.95,1.0 acc 2/3; bin 1: conf .15,.15 acc 0
    want = 3 / 5 * abs(2 / 3 - (0.95 + 0.95 + 1.0) / 3) + 2 / 5 * 0.15
    assert ece(conf, correct) == pytest.approx(want)
    assert brier(conf, correct) == pytest.approx((0.05**2 + 0.95**2 + 2 * 0.15**2 + 0) / 5)
    with pytest.raises(ValueError, match=r"confidence\[0\]: 1.5 is outside"):
        ece(np.array([1.5]), np.array([1]))
    with pytest.raises(ValueError, match=r"correct: expected shape"):
        brier(np.array([0.5, 0.5]), np.array([1]))


def test_spearman_permutation_detects_association_and_is_seeded():
    rng = np.random.default_rng(0)
    a = rng.normal(size=60)
    b = a + rng.normal(size=60) * 0.5
    res = spearman_permutation(a, b, n_resamples=999, seed=42)
    assert res.rho > 0.7 and res.p_value < 0.01
    assert spearman_permutation(a, b, n_resamples=999, seed=42) == res
    null = spearman_permutation(a, rng.normal(size=60), n_resamples=999, seed=42)
    assert null.p_value > 0.01
    with pytest.raises(ValueError, match="at least 3"):
        spearman_permutation(a[:2], b[:2])


def test_rank_mismatch_table_vi_style():
    models = ["m1", "m2", "m3"]
    scores = {
        "accuracy": np.array([0.55, 0.42, 0.40]),
        "d_acc": np.array([-0.12, -0.05, -0.04]),
        "ras": np.array([-0.118, -0.049, -0.058]),
    }
    t = rank_mismatch(models, scores)
    assert t.models == ("m2", "m3", "m1")  # RAS order
    assert t.ranks.tolist() == [[2, 2, 1], [3, 1, 2], [1, 3, 3]]
    assert t.shift.tolist() == [[-1, -1, 0], [-1, 1, 0], [2, 0, 0]]
    lower = rank_mismatch(
        models,
        {"ras": scores["ras"], "gap": np.array([3.0, 1, 2])},
        higher_is_better={"gap": False},
    )
    assert lower.ranks[:, 1].tolist() == [1, 2, 3]  # m2 has the smallest gap
    with pytest.raises(ValueError, match=r"scores\['d_acc'\]\[1\] \(m2\)"):
        rank_mismatch(models, {**scores, "d_acc": np.array([0.1, np.nan, 0.2])})
    with pytest.raises(ValueError, match="reference metric"):
        rank_mismatch(models, {"d_acc": scores["d_acc"]})


def test_rank_table_from_grids():
    rng = np.random.default_rng(0)
    grids = {}
    for name in ("a", "b"):
        lc = rng.normal(size=(10, 4))
        grids[name] = compute_grid(
            lc, lc[:, None, None] + rng.normal(size=(10, 2, 5, 4)), rng.integers(0, 4, 10)
        )
    t = rank_table_from_grids(grids)
    assert t.metrics == ("accuracy", "d_acc", "relative_robustness", "ras")
    assert set(t.models) == {"a", "b"} and t.ranks[0, 3] == 1


def test_spearman_bootstrap_ci_is_scipy_on_the_same_resamples():
    """Every replicate is scipy's spearmanr on the rows bootstrap_indices draws (ties
    included), and the bounds are their 2.5 / 97.5 percentiles."""
    rng = np.random.default_rng(1)
    a = rng.integers(0, 5, 40).astype(float)  # many ties
    b = a + rng.normal(0, 2, 40)
    lo, hi = spearman_bootstrap_ci(a, b, n_boot=300, seed=42)
    reps = [stats.spearmanr(a[i], b[i]).statistic for i in bootstrap_indices(40, 300, 42)]
    assert (lo, hi) == pytest.approx(tuple(np.percentile(reps, [2.5, 97.5])), abs=1e-12)
    assert lo < stats.spearmanr(a, b).statistic < hi
    assert spearman_bootstrap_ci(a, b, n_boot=300, seed=42) == (lo, hi)
    # scipy's own percentile bootstrap (its own draws) lands close by
    ref = stats.bootstrap(
        (a, b),
        lambda x, y: stats.spearmanr(x, y).statistic,
        paired=True,
        vectorized=False,
        n_resamples=300,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    assert lo == pytest.approx(ref.low, abs=0.08) and hi == pytest.approx(ref.high, abs=0.08)
    with pytest.raises(ValueError, match="at least 3"):
        spearman_bootstrap_ci(a[:2], b[:2])


def test_spearman_permutation_in_batches_is_the_same_test():
    rng = np.random.default_rng(5)
    a = rng.normal(size=50)
    b = a + rng.normal(size=50)
    whole = spearman_permutation(a, b, n_resamples=2000, seed=42)
    batched = spearman_permutation(a, b, n_resamples=2000, seed=42, batch=500)
    assert batched.rho == whole.rho
    assert batched.p_value == pytest.approx(whole.p_value, abs=0.01)
