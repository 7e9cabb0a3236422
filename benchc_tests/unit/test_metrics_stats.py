"""Bootstrap over samples: determinism, agreement of the two styles, textbook SE of a mean."""

from __future__ import annotations

import numpy as np
import pytest

from benchc.metrics import (
    bootstrap_ci,
    bootstrap_indices,
    bootstrap_se,
    resample_counts,
    weighted_nanmean,
)


def test_same_seed_same_draws_and_counts_match_indices():
    a = bootstrap_indices(30, 20, seed=5)
    assert np.array_equal(a, bootstrap_indices(30, 20, seed=5))
    assert not np.array_equal(a, bootstrap_indices(30, 20, seed=6))
    c = resample_counts(30, 20, seed=5)
    assert (c.sum(axis=1) == 30).all()
    assert np.array_equal(c[3], np.bincount(a[3], minlength=30))


def test_weighted_nanmean_equals_per_replicate_nanmean():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(25, 3, 2))
    v[rng.random(v.shape) < 0.3] = np.nan
    v[:, 2, 1] = np.nan  # never defined -> NaN in every replicate
    idx = bootstrap_indices(25, 30, seed=1)
    got = weighted_nanmean(v, resample_counts(25, 30, seed=1))
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        want = np.stack([np.nanmean(v[rows], axis=0) for rows in idx])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.isnan(got[:, 2, 1]).all()
    with pytest.raises(ValueError, match=r"counts must be \(B, 25\)"):
        weighted_nanmean(v, np.ones((3, 24)))


def test_bootstrap_se_of_a_mean_is_close_to_the_textbook_value():
    rng = np.random.default_rng(2)
    x = rng.normal(size=400)
    se = bootstrap_se(lambda rows: x[rows].mean(), 400, seed=0, n_boot=2000)
    assert se == pytest.approx(x.std() / np.sqrt(400), rel=0.08)
    lo, hi = bootstrap_ci(lambda rows: x[rows].mean(), 400, seed=0, n_boot=2000)
    assert lo < x.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.1)


def test_bootstrap_se_vector_output_and_undefined_replicates():
    x = np.array([1.0, 2.0, 3.0, 4.0])

    def fn(rows):
        return np.array([x[rows].mean(), np.nan])

    se = bootstrap_se(fn, 4, seed=0, n_boot=50)
    assert se.shape == (2,) and se[0] > 0 and np.isnan(se[1])


def test_bad_bootstrap_arguments():
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_indices(5, 1)
    with pytest.raises(ValueError, match="n_samples"):
        bootstrap_indices(0, 10)
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci(lambda r: 0.0, 5, level=1.5)
