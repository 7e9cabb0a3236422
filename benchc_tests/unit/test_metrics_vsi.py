"""VSI (docs/spec.md §5): full and top-k KL, insensitive fraction, argmax change, probe and gap."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.special import log_softmax

from benchc.metrics import (
    argmax_change_rate,
    encoder_llm_gap,
    insensitive_fraction,
    probe_accuracy,
    vsi_aligned,
    vsi_full,
    vsi_topk,
)
from benchc.metrics.vsi import matched_control, vsi_distribution

logits = hnp.arrays(np.float64, (3, 12), elements=st.floats(-15, 15))


@given(logits, logits)
def test_vsi_nonnegative_and_zero_iff_equal(a, b):
    la, lb = log_softmax(a, axis=1), log_softmax(b, axis=1)
    v = vsi_full(la, lb)
    assert (v >= 0).all()
    assert (vsi_full(la, la) == 0).all()
    differ = np.abs(np.exp(la) - np.exp(lb)).max(axis=1) > 1e-3
    assert (v[differ] > 0).all()


def test_vsi_full_by_hand_and_zero_probability_tokens():
    p = np.array([[np.log(0.5), np.log(0.5), -np.inf]])
    q = np.log(np.array([[0.25, 0.5, 0.25]]))
    assert vsi_full(p, q)[0] == pytest.approx(0.5 * np.log(2))
    assert vsi_full(q, p)[0] == np.inf  # support of p missing a token q uses


def test_vsi_full_rejects_unnormalised_rows_and_nan():
    good = log_softmax(np.zeros((2, 4)), axis=1)
    bad = good.copy()
    bad[1] += 0.5
    with pytest.raises(ValueError, match=r"logp_perturbed\[1\]: not a normalised"):
        vsi_full(good, bad)
    bad = good.copy()
    bad[0, 2] = np.nan
    with pytest.raises(ValueError, match=r"logp_clean\[0, 2\]"):
        vsi_full(bad, good)
    with pytest.raises(ValueError, match="differs"):
        vsi_full(good, good[:, :3] - np.log(0.75))


def _topk(lp, k):
    ids = np.argsort(-lp, axis=1, kind="stable")[:, :k]
    return ids, np.take_along_axis(lp, ids, axis=1)


def test_topk_equals_full_kl_when_k_covers_the_vocabulary():
    rng = np.random.default_rng(0)
    a = log_softmax(rng.normal(size=(4, 10)) * 3, axis=1)
    b = log_softmax(rng.normal(size=(4, 10)) * 3, axis=1)
    v = vsi_topk(*_topk(a, 10), *_topk(b, 10))
    np.testing.assert_allclose(v, vsi_full(a, b), rtol=1e-9)
    ia, la = _topk(a, 10)
    assert (vsi_topk(ia, la, ia[:, ::-1], la[:, ::-1]) == 0).all() or np.allclose(
        vsi_topk(ia, la, ia[:, ::-1], la[:, ::-1]), 0, atol=1e-12
    )


def test_topk_estimate_union_and_renormalisation_by_hand():
    # clean top-2 {0: .6, 1: .3}; perturbed top-2 {1: .5, 2: .4}; union {0, 1, 2}. A side's
    # unknown probability is its smallest returned one (docs/spec.md §5), never a tiny floor.
    ids_c, lp_c = np.array([[0, 1]]), np.log(np.array([[0.6, 0.3]]))
    ids_p, lp_p = np.array([[1, 2]]), np.log(np.array([[0.5, 0.4]]))
    p = np.array([0.6, 0.3, 0.3])
    q = np.array([0.4, 0.5, 0.4])
    p, q = p / p.sum(), q / q.sum()
    want = float(np.sum(p * np.log(p / q)))
    assert vsi_topk(ids_c, lp_c, ids_p, lp_p)[0] == pytest.approx(want, rel=1e-12)
    # padding (-inf) is no token: it neither joins U nor sets the smallest probability
    pad_c, pad_lp = np.array([[0, 1, 7]]), np.array([[np.log(0.6), np.log(0.3), -np.inf]])
    assert vsi_topk(pad_c, pad_lp, ids_p, lp_p)[0] == pytest.approx(want, rel=1e-12)
    # a server names tokens by a hash of their text: negative ids are tokens like any other
    assert vsi_topk(ids_c - 9, lp_c, ids_p - 9, lp_p)[0] == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValueError, match=r"ids_clean\[0\]: top-k token ids repeat"):
        vsi_topk(np.array([[3, 3]]), lp_c, ids_p, lp_p)
    with pytest.raises(ValueError, match=r"\(N, k\)"):
        vsi_topk(ids_c, lp_c[:, :1], ids_p, lp_p)


def test_aligned_reads_each_side_own_probabilities_on_the_union():
    # V = 5; clean top-2 {0, 1}, perturbed top-2 {1, 2}: U = {0, 1, 2}, each side's own mass
    a = np.log(np.array([[0.5, 0.3, 0.1, 0.06, 0.04]]))
    b = np.log(np.array([[0.05, 0.45, 0.4, 0.05, 0.05]]))
    p, q = np.array([0.5, 0.3, 0.1]), np.array([0.05, 0.45, 0.4])
    p, q = p / p.sum(), q / q.sum()
    assert vsi_aligned(a, b, 2)[0] == pytest.approx(float(np.sum(p * np.log(p / q))), rel=1e-12)
    np.testing.assert_allclose(vsi_aligned(a, b, 5), vsi_full(a, b), rtol=1e-12)
    # the server estimate equals it when every token of U is returned by both sides
    ia, la = _topk(a, 5)
    ib, lb = _topk(b, 5)
    np.testing.assert_allclose(vsi_topk(ia, la, ib, lb), vsi_aligned(a, b, 5), rtol=1e-12)


def test_aligned_top50_of_a_flat_distribution_stays_near_the_full_vsi():
    # a flat 300-token distribution under a small perturbation (a random-weight model): the
    # 1e-12 floor made top-50 VSI ~1e4 x the full VSI; the aligned support keeps it close
    rng = np.random.default_rng(1)
    a = log_softmax(rng.normal(size=(40, 300)) * 0.05, axis=1)
    b = log_softmax(np.log(np.exp(a)) + rng.normal(size=(40, 300)) * 0.02, axis=1)
    full, top = vsi_full(a, b), vsi_aligned(a, b, 50)
    ratio = top / full
    assert np.all((ratio > 0.1) & (ratio < 10)), ratio
    ia, la = _topk(a, 50)
    ib, lb = _topk(b, 50)
    est = vsi_topk(ia, la, ib, lb)
    assert np.all((est / full > 0.1) & (est / full < 10))


def test_insensitive_fraction_and_argmax_change_rate():
    assert insensitive_fraction(np.array([0.01, 0.049, 0.05, 2.0])) == 0.5
    assert np.isnan(insensitive_fraction(np.array([])))
    with pytest.raises(ValueError, match=r"vsi\[1\]"):
        insensitive_fraction(np.array([0.1, np.nan]))
    assert argmax_change_rate(np.array([1, 2, 3, 4]), np.array([1, 0, 3, 0])) == 0.5
    with pytest.raises(ValueError, match=r"\(N,\)"):
        argmax_change_rate(np.array([1, 2]), np.array([1]))


def _views(rng, n, f, shift):
    clean = rng.normal(size=(n, f))
    pert = clean + rng.normal(size=(n, f)) * 0.3
    pert[:, 0] += shift  # the perturbation is linearly visible along feature 0
    return clean, pert


def test_probe_separates_a_visible_perturbation_and_not_an_invisible_one():
    rng = np.random.default_rng(0)
    seen = probe_accuracy(*_views(rng, 60, 8, 4.0))
    blind = probe_accuracy(*_views(rng, 60, 8, 0.0))
    assert seen.fold_accuracies.shape == (5,)
    assert seen.accuracy > 0.9 and blind.accuracy < 0.75
    again = probe_accuracy(*_views(np.random.default_rng(0), 60, 8, 4.0))
    assert again.accuracy == seen.accuracy  # deterministic


def test_probe_bad_input():
    with pytest.raises(ValueError, match="cannot fill 5"):
        probe_accuracy(np.ones((4, 3)), np.ones((4, 3)))
    bad = np.ones((6, 3))
    bad[2, 1] = np.inf
    with pytest.raises(ValueError, match=r"features_perturbed\[2\]"):
        probe_accuracy(np.ones((6, 3)), bad)


def test_encoder_llm_gap_follows_the_paper_protocol_on_the_pool():
    rng = np.random.default_rng(1)
    clean, pert = _views(rng, 40, 6, 4.0)
    vsi = np.r_[np.full(30, 0.01), np.linspace(2.0, 1.0, 10)]
    top_c = np.zeros(40, int)
    top_p = np.r_[np.zeros(27, int), np.ones(3, int), np.ones(10, int)]  # 3/30 change when low
    gap = encoder_llm_gap(vsi, clean, pert, top_c, top_p)
    assert gap.n == 30 and gap.change_rate == pytest.approx(0.1)
    # the probe is fitted on the 30 pool images alone (App. A.4), its fold std reported
    on_pool = probe_accuracy(clean[:30], pert[:30])
    assert gap.probe_accuracy == pytest.approx(on_pool.accuracy)
    assert gap.probe.fold_std == pytest.approx(on_pool.fold_std)
    assert gap.gap == pytest.approx(gap.probe_accuracy - gap.change_rate)
    # the matched control: as many of the most sensitive samples as the pool holds (all 10)
    assert gap.control_probe.accuracy == pytest.approx(
        probe_accuracy(clean[30:], pert[30:]).accuracy
    )
    assert gap.control_change_rate == 1.0
    # a pool fixed by another model is read as given
    fixed = np.r_[np.ones(10, bool), np.zeros(30, bool)]
    other = encoder_llm_gap(np.ones(40), clean, pert, top_c, top_p, pool=fixed)
    assert other.n == 10 and other.change_rate == 0.0
    assert other.probe_accuracy == pytest.approx(probe_accuracy(clean[:10], pert[:10]).accuracy)
    few = encoder_llm_gap(np.r_[np.full(3, 0.0), np.ones(37)], clean, pert, top_c, top_p)
    assert few.n == 3 and few.probe is None and np.isnan(few.gap)  # 3 images, 5 folds
    none_low = encoder_llm_gap(np.ones(40), clean, pert, top_c, top_p)
    assert none_low.n == 0 and np.isnan(none_low.gap)


def test_matched_control_takes_the_most_sensitive_outside_the_pool():
    vsi = np.array([0.01, 0.02, 5.0, 3.0, 3.0, 0.5, 9.0])
    pool = vsi < 0.05
    want = [False, False, True, False, False, False, True]
    np.testing.assert_array_equal(matched_control(vsi, pool), want)
    # ties: the lower index first
    np.testing.assert_array_equal(
        matched_control(
            np.array([0.0, 0.0, 0.0, 3.0, 3.0, 3.0]), np.r_[True, True, False, False, False, False]
        ),
        [False, False, False, True, True, False],
    )


def test_repeated_images_share_a_fold_so_the_probe_cannot_recall_them():
    """A bootstrap resample repeats images. Each image here is perturbed in its own random
    direction, so no linear rule generalises across images (chance, ~0.5); a copy of a training
    image in the test fold would be recalled. ``image_ids`` keeps the copies together."""
    rng = np.random.default_rng(3)
    n, f = 24, 64
    clean = rng.normal(size=(n, f))
    pert = clean + rng.normal(size=(n, f)) * 2.0
    rows = np.repeat(np.arange(n), 4)  # every image four times
    grouped = probe_accuracy(clean[rows], pert[rows], image_ids=rows)
    leaky = probe_accuracy(clean[rows], pert[rows])  # copies treated as distinct images
    assert grouped.accuracy < 0.65 < leaky.accuracy
    with pytest.raises(ValueError, match="4 distinct images cannot fill 5"):
        probe_accuracy(clean[:8], pert[:8], image_ids=np.arange(8) % 4)
    with pytest.raises(ValueError, match=r"image_ids must be \(8,\)"):
        probe_accuracy(clean[:8], pert[:8], image_ids=np.arange(7))


def test_gap_counts_distinct_images_for_its_folds():
    rng = np.random.default_rng(4)
    clean, pert = _views(rng, 12, 6, 4.0)
    vsi, top = np.zeros(12), np.zeros(12, int)
    rows = np.r_[np.zeros(8, int), np.arange(1, 5)]  # 12 rows, 5 distinct images
    ok = encoder_llm_gap(vsi, clean[rows], pert[rows], top, top, image_ids=rows)
    assert ok.probe is not None and ok.n == 12
    rows = np.r_[np.zeros(9, int), np.arange(1, 4)]  # 12 rows, 4 distinct images
    few = encoder_llm_gap(vsi, clean[rows], pert[rows], top, top, image_ids=rows)
    assert few.probe is None and np.isnan(few.gap)


def test_probe_per_image_correctness_pools_into_its_accuracy():
    rng = np.random.default_rng(5)
    clean, pert = _views(rng, 30, 6, 2.0)
    probe = probe_accuracy(clean, pert)
    assert probe.correct.shape == (30,)
    assert set(np.unique(probe.correct)) <= {0.0, 0.5, 1.0}
    assert probe.accuracy == pytest.approx(probe.correct.mean())


def test_chunked_vsi_equals_unchunked_and_names_the_global_row():
    rng = np.random.default_rng(3)
    a = log_softmax(rng.normal(size=(10, 50)), axis=1)
    b = log_softmax(rng.normal(size=(10, 50)), axis=1)
    np.testing.assert_allclose(vsi_full(a, b, chunk_rows=3), vsi_full(a, b, chunk_rows=64))
    b[7, 4] = np.nan
    with pytest.raises(ValueError, match=r"logp_perturbed\[7, 4\]"):
        vsi_full(a, b, chunk_rows=3)


def test_vsi_distribution_is_table_1():
    import diptest
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    rng = np.random.default_rng(7)
    vsi = np.r_[rng.lognormal(-6, 1, 60), rng.lognormal(0.5, 0.5, 140)]
    d = vsi_distribution(vsi)
    assert d.n == 200 and d.median == pytest.approx(np.median(vsi))
    assert d.below_001 == pytest.approx(np.mean(vsi < 0.01))
    assert d.below_005 == pytest.approx(np.mean(vsi < 0.05))
    x = np.log10(vsi)[:, None]
    assert d.dip_p == pytest.approx(diptest.diptest(x[:, 0])[1])
    labels = KMeans(2, n_init=10, random_state=42).fit_predict(x)
    assert d.silhouette == pytest.approx(silhouette_score(x, labels))
    assert d.dip_p < 0.05 < vsi_distribution(rng.lognormal(0, 1, 200)).dip_p  # two modes vs one
    assert np.isnan(vsi_distribution(np.ones(10)).silhouette)
