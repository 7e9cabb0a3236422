"""Selection core on a fake selector pair whose answers are known: hand-computed kappa, A+,
greedy novelty order, e, the final set and leave-one-selector-out Jaccard."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchc.select.core import build_report, per_sample_rows, run_selection

D, L = 19, 5
# Severity trajectories (K = 4) and their normalised Gini G = 4/3 (1 - sum pi^2):
P_A = [0, 1, 2, 3, 0]  # pi = .4 .2 .2 .2 -> G = 4/3 * .72 = .96
P_B = [0, 0, 0, 1, 1]  # pi = .6 .4       -> G = 4/3 * .48 = .64
P_C = [0, 0, 0, 0, 1]  # pi = .8 .2       -> G = 4/3 * .32 = .42667
G_A, G_B, G_C = 0.96, 0.64, 4 / 3 * 0.32


def _traj(pattern, n_corruptions):
    """(D, L): ``pattern`` for the first n corruptions, a constant answer for the rest."""
    out = np.zeros((D, L), np.int64)
    out[:n_corruptions] = pattern
    return out


def _fake_top1():
    top1 = np.zeros((2, 6, D, L), np.int64)
    for f in (0, 1):
        top1[f, 0] = _traj(P_B, 2)  # both selectors respond in 2 corruptions
        # sample 1: constant everywhere -> kappa 0
        top1[f, 3] = _traj(P_A, D)  # responds everywhere
        top1[f, 4] = _traj(P_C, 1)
        top1[f, 5] = _traj(P_C, 4)
    top1[0, 2] = _traj(P_A, 1)  # only selector 0 responds -> not in A+
    return top1


# 2-d embeddings (text = image, so novelty = 1 - cos(v, centroid))
EMB = np.array([[0, 1], [1, -1], [0, -1], [1, 0], [1, 1], [1, 0.1]], float)
IDS = [f"s{i}" for i in range(6)]
CATS = ["a", "a", "b", "c", "c", "b"]
ANSWERS = np.array([0, 0, 1, 0, 1, 2])
CLEAN = np.array([[0, 0, 0, 0, 1, 1], [0, 1, 1, 0, 1, 2]])


def _select(top1=None, **overrides):
    """The toy selection (two selectors, six samples), with any argument replaced."""
    kwargs = dict(
        ids=IDS, categories=CATS, answers=ANSWERS, clean_top1=CLEAN, selector_names=["m0", "m1"]
    )
    kwargs.update(overrides)
    top1 = _fake_top1() if top1 is None else top1
    return run_selection(top1, np.full(6, 4), EMB, EMB, **kwargs)


@pytest.fixture(scope="module")
def run():
    return _select()


def test_kappa_and_eligibility(run):
    kappa = [2 * G_B / D, 0.0, G_A / D / 2, G_A, G_C / D, 4 * G_C / D]
    np.testing.assert_allclose(run.selection.kappa, kappa, rtol=1e-12)
    assert run.selection.eligible.tolist() == [True, False, False, True, True, True]


def test_novelty_order_and_final_set(run):
    sel = run.selection
    # first pick: highest kappa (s3, nu = 1); centroid (1,0): s0 is orthogonal (nu = 1);
    # centroid (1,1): s5 (nu = 1 - 1.1 / (sqrt 2 sqrt 1.01)) beats s4 (nu = 0); then s4.
    assert sel.order.tolist() == [3, 0, 5, 4]
    nu5 = 1 - 1.1 / (math.sqrt(2) * math.sqrt(1.01))
    c = np.array([1.0, 0.0]) + np.array([0.0, 1.0]) + np.array([1, 0.1]) / math.sqrt(1.01)
    nu4 = 1 - c.sum() / (math.sqrt(2) * np.linalg.norm(c))
    np.testing.assert_allclose(sel.novelty[[3, 0, 5, 4]], [1, 1, nu5, nu4], rtol=1e-12)
    e = sel.kappa + np.nan_to_num(sel.novelty)
    np.testing.assert_allclose(sel.e[[0, 3, 4, 5]], e[[0, 3, 4, 5]])
    assert math.isclose(np.nanmean(sel.e), (e[0] + e[3] + e[4] + e[5]) / 4)  # about .851
    assert [IDS[i] for i in np.nonzero(sel.selected)[0]] == ["s0", "s3"]


def test_leave_one_selector_out(run):
    rows = {r["removed"]: r for r in run.loso}
    # without m0: s2 loses its only response; everything else is unchanged
    assert rows["m0"]["fixed_ji"] == 1.0 and rows["m0"]["recomputed_ji"] == 1.0
    # without m1: the fixed pool keeps {s0, s3}; recomputed A+ admits s2 (nu = 1 + 1/sqrt 2,
    # e ~ 1.758), e-mean rises to ~1.047 and s0 (e ~ 1.067) stays: {s0, s2, s3}
    assert rows["m1"]["fixed_ji"] == 1.0 and rows["m1"]["fixed_retained"] == 2
    assert rows["m1"]["recomputed_ji"] == pytest.approx(2 / 3)
    assert rows["m1"]["recomputed_retained"] == 2 and rows["m1"]["n_selected"] == 2


def test_report(run):
    rep = build_report(run)
    assert (rep["n_pool"], rep["n_eligible"], rep["n_selected"]) == (6, 4, 2)
    assert rep["kappa"]["pool"]["histogram"][0] == 5 and rep["kappa"]["pool"]["histogram"][9] == 1
    assert rep["kappa"]["selected"]["histogram"][0] == 1 and rep["kappa"]["selected"]["n"] == 2
    assert rep["category_counts"]["selected"] == {"a": 1, "c": 1}
    assert rep["category_shift"]["b"] == pytest.approx(0 - 2 / 6)
    acc = {s["name"]: s for s in rep["selectors"]}
    assert acc["m0"]["clean_accuracy_pool"] == pytest.approx(4 / 6)  # s0, s1, s3, s4
    assert acc["m1"]["clean_accuracy_pool"] == pytest.approx(5 / 6)
    assert (acc["m0"]["selected_clean_correct"], acc["m0"]["selected_clean_wrong"]) == (2, 0)
    assert rep["selected_answer_letters"] == [2, 0, 0, 0]
    rows = per_sample_rows(run)
    assert [r["greedy_rank"] for r in rows] == [1, -1, -1, 0, 3, 2]


def test_single_selector_has_no_loso():
    r = _select(_fake_top1()[:1], clean_top1=CLEAN[:1], selector_names=["m0"])
    assert r.loso is None
    assert r.selection.eligible.tolist() == [True, False, True, True, True, True]


def test_shape_errors():
    with pytest.raises(ValueError, match="selector names"):
        _select(selector_names=["m0"])
    with pytest.raises(ValueError, match="clean_top1"):
        _select(clean_top1=CLEAN[:1])
