"""Option distributions, S and C (docs/spec.md §2 and §4, Eqs. 7 and 9) and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchc.metrics import (
    alignment,
    confidence,
    infer_n_options,
    low_option_mass,
    normalized_entropy,
    option_probs,
    predictions,
    validate_answers,
    validate_option_logits,
)

finite = st.floats(-30, 30, allow_nan=False, allow_infinity=False, width=32)


@st.composite
def padded_logits(draw, max_k: int = 6):
    """(N, K_max) NaN-padded logits with per-sample K and a valid answer per sample."""
    n = draw(st.integers(1, 5))
    k_max = draw(st.integers(2, max_k))
    k = np.array(draw(st.lists(st.integers(2, k_max), min_size=n, max_size=n)))
    x = draw(hnp.arrays(np.float64, (n, k_max), elements=finite))
    x[np.arange(k_max)[None, :] >= k[:, None]] = np.nan
    y = np.array([draw(st.integers(0, int(ki) - 1)) for ki in k])
    return x, k, y


@given(padded_logits())
def test_probabilities_are_float32_distributions_over_the_k_options(data):
    x, k, _ = data
    p = option_probs(x, k)
    assert p.dtype == np.float32
    assert (p >= 0).all()
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    assert (p[np.arange(x.shape[1])[None] >= k[:, None]] == 0).all()


@given(padded_logits())
def test_s_and_c_lie_in_unit_interval(data):
    x, k, y = data
    p = option_probs(x, k)
    s = normalized_entropy(p, k)
    c = alignment(p, y)
    assert ((s >= 0) & (s <= 1)).all()
    assert ((c >= 0) & (c <= 1)).all()


@given(padded_logits(), st.floats(-10, 10, allow_nan=False))
def test_adding_a_constant_to_a_samples_logits_changes_nothing(data, shift):
    x, k, y = data
    shifted = x + shift * np.arange(1, x.shape[0] + 1)[:, None]  # a different constant per sample
    p, q = option_probs(x, k), option_probs(shifted, k)
    np.testing.assert_allclose(q, p, atol=2e-5)
    np.testing.assert_allclose(normalized_entropy(q, k), normalized_entropy(p, k), atol=1e-4)
    top = np.sort(p, axis=-1)
    away = top[:, -1] - top[:, -2] > 1e-3
    np.testing.assert_allclose(alignment(q, y)[away], alignment(p, y)[away], atol=1e-4)


@given(padded_logits(), st.randoms(use_true_random=False))
def test_permuting_options_with_the_label_changes_nothing(data, rnd):
    x, k, y = data
    p = option_probs(x, k)
    top = np.sort(p, axis=-1)
    assume((top[:, -1] - top[:, -2] > 1e-3).all())  # away from ties
    xp, yp = x.copy(), y.copy()
    for i, ki in enumerate(k):
        perm = list(range(int(ki)))
        rnd.shuffle(perm)
        xp[i, : int(ki)] = x[i, perm]
        yp[i] = perm.index(int(y[i]))
    q = option_probs(xp, k)
    np.testing.assert_allclose(normalized_entropy(q, k), normalized_entropy(p, k), atol=1e-5)
    np.testing.assert_allclose(alignment(q, yp), alignment(p, y), atol=1e-6)


def test_uniform_and_one_hot_extremes():
    k = np.array([4, 4])
    x = np.array([[0.0, 0.0, 0.0, 0.0], [0.0, -200.0, -200.0, -200.0]])
    p = option_probs(x, k)
    np.testing.assert_allclose(normalized_entropy(p, k), [1.0, 0.0], atol=1e-6)
    # uniform: predicted option 0 (lowest-index tie), right answer 0 -> C = 1 - 1/4
    np.testing.assert_allclose(alignment(p, np.array([0, 0])), [0.75, 0.0], atol=1e-6)
    # one-hot on a wrong answer is maximally misaligned
    np.testing.assert_allclose(alignment(p, np.array([1, 1])), [0.25, 1.0], atol=1e-6)


def test_ties_go_to_the_lowest_index():
    p = option_probs(
        np.array([[-100.0, 3.0, 3.0, 3.0], [2.0, 2.0, np.nan, np.nan]]), np.array([4, 2])
    )
    assert predictions(p).tolist() == [1, 0]
    # a tie on the right answer counts as correct only when it is the lowest tied index
    np.testing.assert_allclose(alignment(p, np.array([1, 1])), [1 - 1 / 3, 0.5], atol=1e-6)


def test_k2_hand_computed():
    # p = (0.8, 0.2): S = H(0.8) / log 2, right answer 1 -> wrong prediction with conf 0.8.
    x = np.array([[math.log(0.8), math.log(0.2)]])
    k = np.array([2])
    p = option_probs(x, k)
    h = -(0.8 * math.log(0.8) + 0.2 * math.log(0.2)) / math.log(2)
    assert normalized_entropy(p, k)[0] == pytest.approx(h, abs=1e-6)
    assert confidence(p)[0] == pytest.approx(0.8, abs=1e-6)
    assert alignment(p, np.array([1]))[0] == pytest.approx(0.8, abs=1e-6)
    assert alignment(p, np.array([0]))[0] == pytest.approx(0.2, abs=1e-6)


def test_entropy_normalises_by_each_samples_own_k():
    x = np.array([[0.0, 0.0, np.nan], [0.0, 0.0, 0.0]])
    k = np.array([2, 3])
    np.testing.assert_allclose(normalized_entropy(option_probs(x, k), k), [1.0, 1.0], atol=1e-6)


def test_infer_n_options_reads_the_padding_and_rejects_inconsistent_padding():
    x = np.zeros((2, 3, 4))
    x[1, :, 3] = np.nan
    assert infer_n_options(x).tolist() == [4, 3]
    x[1, 2, 2] = np.nan
    with pytest.raises(ValueError, match="sample 1"):
        infer_n_options(x)


@pytest.mark.parametrize(
    ("mutate", "pattern"),
    [
        (lambda x, k: x.__setitem__((1, 1, 0), np.nan), r"logits\[1, 1, 0\].*finite"),
        (lambda x, k: x.__setitem__((0, 1, 2), np.inf), r"logits\[0, 1, 2\].*finite"),
        (lambda x, k: x.__setitem__((2, 0, 3), 1.0), r"logits\[2, 0, 3\].*padding"),
        (lambda x, k: k.__setitem__(1, 1), r"sample 1 has K=1"),
        (lambda x, k: k.__setitem__(0, 5), r"sample 0 has K=5"),
    ],
)
def test_bad_logits_name_the_offending_index(mutate, pattern):
    x = np.zeros((3, 2, 4))
    x[2, :, 3] = np.nan
    k = np.array([4, 4, 3])
    mutate(x, k)
    with pytest.raises(ValueError, match=pattern):
        validate_option_logits(x, k)


def test_bad_shapes_and_dtypes_are_rejected():
    with pytest.raises(ValueError, match="shape"):
        validate_option_logits(np.zeros(4))
    with pytest.raises(ValueError, match="floating"):
        validate_option_logits(np.zeros((2, 4), dtype=np.int64))
    with pytest.raises(ValueError, match=r"n_options must have shape \(2,\)"):
        validate_option_logits(np.zeros((2, 4)), np.array([4, 4, 4]))


def test_answers_out_of_range_name_the_sample():
    with pytest.raises(ValueError, match=r"answers\[1\]: answer index 3 out of range for K=3"):
        validate_answers(np.array([0, 3]), np.array([4, 3]))
    with pytest.raises(ValueError, match=r"answers\[0\]"):
        validate_answers(np.array([-1, 0]), np.array([4, 3]))
    with pytest.raises(ValueError, match="integers"):
        validate_answers(np.array([0.0, 1.0]), np.array([4, 3]))


def test_low_option_mass_flag():
    assert low_option_mass(np.array([0.9, 0.5, 0.49, 0.0])).tolist() == [False, False, True, True]
    with pytest.raises(ValueError, match=r"option_mass\[1\]: nan"):
        low_option_mass(np.array([0.9, np.nan]))


def test_float64_logits_beyond_float32_range_are_rejected():
    logits = np.array([[0.0, 1e39, -1.0], [0.5, 0.1, 0.2]], dtype=np.float64)
    with pytest.raises(ValueError, match=r"logits\[0, 1\].*beyond the float32 range"):
        validate_option_logits(logits)
    ok = np.array([[0.0, 3e38, -1.0]], dtype=np.float64)  # inside float32: accepted
    assert validate_option_logits(ok).tolist() == [3]
