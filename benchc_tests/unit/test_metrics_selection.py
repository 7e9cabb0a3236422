"""Bench-C selection (Eqs. 1-6) and the leave-one-selector-out Jaccard (Table I)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from benchc.metrics import (
    eligible,
    gini_dispersion,
    greedy_novelty,
    jaccard,
    kappa,
    leave_one_selector_out,
    select,
)


@given(
    st.integers(2, 8).flatmap(
        lambda k: st.tuples(
            st.just(k), hnp.arrays(np.int64, (7, 5), elements=st.integers(0, k - 1))
        )
    )
)
def test_gini_in_unit_interval_and_zero_iff_all_answers_agree(data):
    k, top1 = data
    g = gini_dispersion(top1, np.full(7, k))
    assert ((g >= 0) & (g <= 1)).all()
    same = (top1 == top1[:, :1]).all(axis=1)
    assert ((g == 0) == same).all()


def test_gini_by_hand():
    top1 = np.array([[0, 0, 0, 0, 0], [0, 1, 0, 1, 0], [0, 1, 2, 3, 0], [1, 0, 0, 0, 0]])
    k = np.array([4, 2, 4, 2])
    # counts (5), (3,2), (2,1,1,1), (4,1)
    want = [
        0.0,
        2 * (1 - (9 + 4) / 25),
        4 / 3 * (1 - (4 + 1 + 1 + 1) / 25),
        2 * (1 - (16 + 1) / 25),
    ]
    np.testing.assert_allclose(gini_dispersion(top1, k), want)


def test_gini_bad_input_names_the_index():
    with pytest.raises(ValueError, match=r"top1\[1, 3\]: option index 2 out of range for K=2"):
        gini_dispersion(np.array([[0, 0, 0, 0, 0], [0, 1, 0, 2, 0]]), np.array([4, 2]))
    with pytest.raises(ValueError, match=r"n_options\[0\]: K=1"):
        gini_dispersion(np.zeros((1, 5), int), np.array([1]))
    with pytest.raises(ValueError, match="integer"):
        gini_dispersion(np.zeros((1, 5)), np.array([4]))


def test_kappa_and_eligibility_require_every_selector():
    # F=2 selectors, Q=3 samples, D=2 corruptions, L=5
    top1 = np.zeros((2, 3, 2, 5), dtype=np.int64)
    top1[0, 0, 0] = [0, 1, 0, 1, 0]  # sample 0: selector 0 responds, selector 1 does not
    top1[:, 1, 1] = [0, 0, 1, 1, 2]  # sample 1: both respond on corruption 1
    k = np.array([4, 4, 4])
    g0 = 4 / 3 * (1 - 13 / 25)
    g1 = 4 / 3 * (1 - (4 + 4 + 1) / 25)
    np.testing.assert_allclose(kappa(top1, k), [g0 / 4, g1 / 2, 0.0])
    assert eligible(top1, k).tolist() == [False, True, False]


def test_tied_kappas_are_bit_equal_whatever_the_corruption_order():
    # The same five per-corruption trajectories in another corruption order: kappa is the same
    # rational number, and summing G in floating point made the two differ by an ulp.
    trajs = [[0, 0, 0, 0, 0], [0, 0, 0, 0, 1], [0, 0, 1, 1, 2]]
    a, b = [2, 2, 1, 1, 0], [0, 2, 1, 2, 1]
    top1 = np.array([[[trajs[i] for i in a], [trajs[i] for i in b]]], dtype=np.int64)
    k = np.array([4, 4])
    agree = (top1[..., :, None] == top1[..., None, :]).sum(axis=(-1, -2))
    float_mean = (4 / 3 * (1.0 - agree / 25.0)).mean(axis=2).mean(axis=0)
    assert float_mean[0] != float_mean[1]  # the rounding noise the integer form removes
    kap = kappa(top1, k)
    assert kap[0] == kap[1]
    assert kap[0] == pytest.approx(4 / 3 * (2 * 16 + 2 * 8) / (5 * 25))
    # the tie goes to the lowest index: the first novelty pick is sample 0
    emb = np.array([[1.0, 0.0], [0.0, 1.0]])
    s = select(top1, k, emb, emb)
    assert s.order[0] == 0


def test_greedy_novelty_by_hand():
    # three orthogonal-ish directions; first pick is the highest kappa (item 2) with nu = 1
    img = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.1], [0.7, 0.7]])
    txt = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    kap = np.array([0.1, 0.2, 0.9, 0.3])
    nu, order = greedy_novelty(img, txt, kap)
    assert order[0] == 2 and nu[2] == 1.0
    # step 2: centroid = item 2; item 1 is orthogonal in both spaces -> most novel
    u2 = img[2] / np.linalg.norm(img[2])
    assert order[1] == 1
    assert nu[1] == pytest.approx(1 - (u2 @ img[1]) / 2)
    # the remaining order and values follow the centroid of the normalised selected vectors
    assert sorted(order.tolist()) == [0, 1, 2, 3]
    assert np.isfinite(nu).all()


def test_greedy_novelty_matches_naive_recomputation():
    rng = np.random.default_rng(0)
    img, txt = rng.normal(size=(40, 6)), rng.normal(size=(40, 5))
    kap = rng.random(40)
    pool = rng.random(40) < 0.7
    nu, order = greedy_novelty(img, txt, kap, pool)
    assert np.isnan(nu[~pool]).all() and set(order.tolist()) == set(np.nonzero(pool)[0].tolist())
    ui = img / np.linalg.norm(img, axis=1, keepdims=True)
    ut = txt / np.linalg.norm(txt, axis=1, keepdims=True)
    chosen: list[int] = []
    for step, q in enumerate(order):
        if step == 0:
            assert q == np.nonzero(pool)[0][np.argmax(kap[pool])]
            chosen.append(int(q))
            continue
        mi, mt = ui[chosen].mean(0), ut[chosen].mean(0)
        cand = [i for i in np.nonzero(pool)[0] if i not in chosen]
        score = [
            1 - (ui[i] @ mi / np.linalg.norm(mi) + ut[i] @ mt / np.linalg.norm(mt)) / 2
            for i in cand
        ]
        best = cand[int(np.argmax(score))]
        assert q == best and nu[q] == pytest.approx(max(score), abs=1e-9)
        chosen.append(int(q))


def test_zero_embedding_is_rejected_with_its_index():
    img = np.ones((3, 2))
    img[1] = 0
    with pytest.raises(ValueError, match=r"image_emb\[1\]: zero embedding"):
        greedy_novelty(img, np.ones((3, 2)), np.zeros(3))


def _selection_inputs(seed=0, f=3, q=60, d=4):
    rng = np.random.default_rng(seed)
    top1 = np.where(rng.random((f, q, d, 5)) < 0.5, 0, rng.integers(0, 4, (f, q, d, 5)))
    top1[:, :10] = 0  # never responsive: ineligible
    return top1, np.full(q, 4), rng.normal(size=(q, 8)), rng.normal(size=(q, 6))


def test_select_keeps_above_mean_e_within_eligible_pool():
    top1, k, img, txt = _selection_inputs()
    s = select(top1, k, img, txt)
    assert not s.eligible[:10].any() and not s.selected[:10].any()
    e = s.kappa + s.novelty
    np.testing.assert_allclose(s.e[s.eligible], e[s.eligible])
    assert np.isnan(s.e[~s.eligible]).all()
    assert (
        s.selected == (s.eligible & (np.nan_to_num(s.e, nan=-9) > s.e[s.eligible].mean()))
    ).all()
    assert 0 < s.selected.sum() < s.eligible.sum()


def test_jaccard_and_leave_one_selector_out():
    a = np.array([1, 1, 0, 0], bool)
    b = np.array([0, 1, 1, 0], bool)
    assert jaccard(a, b) == pytest.approx(1 / 3)
    assert np.isnan(jaccard(np.zeros(3, bool), np.zeros(3, bool)))
    top1, k, img, txt = _selection_inputs(seed=1)
    rows = leave_one_selector_out(top1, k, img, txt)
    assert [r.removed for r in rows] == [0, 1, 2]
    full = select(top1, k, img, txt)
    for r in rows:
        rest = np.delete(top1, r.removed, axis=0)
        fixed = select(rest, k, img, txt, pool=full.eligible)
        assert r.fixed_ji == pytest.approx(jaccard(full.selected, fixed.selected))
        assert r.fixed_retained == int((full.selected & fixed.selected).sum())
        assert 0 <= r.recomputed_ji <= 1 and r.n_selected == full.selected.sum()
    # identical selectors: removing any one changes nothing
    same = np.repeat(top1[:1], 3, axis=0)
    assert all(
        r.fixed_ji == 1.0 and r.recomputed_ji == 1.0
        for r in leave_one_selector_out(same, k, img, txt)
    )
