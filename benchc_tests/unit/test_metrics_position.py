"""Option order as a structural axis: the rotation schedule, the position figures' invariants
(hypothesis) and the embedded model scored under rotations through its real batches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchc.data.rotations import (
    ALL_ROTATIONS_UP_TO,
    MAX_ROTATIONS,
    rotate,
    rotated_answer,
    rotations,
)
from benchc.metrics.position import (
    accuracy_by_position,
    chosen,
    circular_accuracy,
    order_interaction,
    position_preference,
    position_spread,
)

REPO = Path(__file__).resolve().parents[2]


def test_rotations_are_all_orders_up_to_six_options_and_a_seeded_subset_above():
    assert rotations(4, "a") == (0, 1, 2, 3)
    assert rotations(ALL_ROTATIONS_UP_TO, "a") == tuple(range(ALL_ROTATIONS_UP_TO))
    drawn = rotations(10, "sample-7", seed=3)
    assert len(drawn) == MAX_ROTATIONS and drawn[0] == 0 and len(set(drawn)) == len(drawn)
    assert all(0 <= r < 10 for r in drawn) and list(drawn) == sorted(drawn)
    assert rotations(10, "sample-7", seed=3) == drawn  # the same in every call and process
    assert len({rotations(10, f"s{i}", seed=3) for i in range(20)}) > 1  # per sample
    with pytest.raises(ValueError, match="sample 'x': a rotation needs >= 2 options"):
        rotations(1, "x")


def test_a_rotation_moves_the_answer_with_its_content():
    options = ("cat", "dog", "fox", "owl")
    for r in range(4):
        shown = rotate(options, r)
        assert sorted(shown) == sorted(options)  # the same option set, another order
        assert shown[rotated_answer(2, r, 4)] == "fox"


# -- a model of content and position --------------------------------------------------------
def _scores(content: np.ndarray, position: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Probabilities by position of a model whose logit is content score + position bias."""
    n, k = content.shape
    out = np.empty((n, offsets.shape[1], k), np.float32)
    for i in range(n):
        for s, r in enumerate(offsets[i]):
            logit = np.array([content[i, (j + r) % k] for j in range(k)]) + position[i]
            e = np.exp(logit - logit.max())
            out[i, s] = e / e.sum()
    return out


@st.composite
def cases(draw):
    n = draw(st.integers(1, 6))
    k = draw(st.integers(2, 6))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    content = rng.normal(0, draw(st.sampled_from([0.0, 0.5, 3.0])), (n, k))
    position = rng.normal(0, draw(st.sampled_from([0.0, 0.5, 3.0])), (n, k))
    answers = rng.integers(0, k, n)
    offsets = np.tile(np.arange(k), (n, 1))
    return content, position, answers, offsets, np.full(n, k)


def _figures(probs, offsets, answers, k):
    return (circular_accuracy(probs, offsets, answers, k), position_preference(probs, offsets, k),
            accuracy_by_position(probs, offsets, answers, k).tolist())  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(cases())
def test_circular_accuracy_is_at_most_the_accuracy_of_any_one_order(case):
    content, position, answers, offsets, k = case
    probs = _scores(content, position, offsets)
    circ = circular_accuracy(probs, offsets, answers, k)
    _, picked = chosen(probs, offsets, k)
    for s in range(offsets.shape[1]):
        assert circ <= float((picked[:, s] == answers).mean())
    spread = position_spread(probs, offsets, k)
    assert ((spread >= 0) & (spread <= 1)).all()


@settings(max_examples=150, deadline=None)
@given(cases(), st.integers(0, 5), st.randoms(use_true_random=False))
def test_the_figures_do_not_depend_on_which_order_is_called_the_first(case, shift, rnd):
    content, position, answers, offsets, k = case
    kk = int(k[0])
    shift %= kk
    probs = _scores(content, position, offsets)
    # the same orders, named from another first one: contents relabelled, answers moved,
    # each slot's rotation renamed, the slots in another order
    relabelled = np.roll(content, -shift, axis=1)
    moved = (answers - shift) % kk
    renamed = (offsets - shift) % kk
    slots = list(range(kk))
    rnd.shuffle(slots)
    again = _scores(relabelled, position, renamed)[:, slots]
    np.testing.assert_allclose(again, probs[:, slots], rtol=1e-6)  # the same queries scored
    assert _figures(again, renamed[:, slots], moved, k) == _figures(probs, offsets, answers, k)


@settings(max_examples=100, deadline=None)
@given(cases())
def test_a_model_of_position_alone_has_no_circular_accuracy_and_full_preference(case):
    _, position, answers, offsets, k = case
    probs = _scores(np.zeros_like(position), position, offsets)
    assert circular_accuracy(probs, offsets, answers, k) == 0.0
    assert position_preference(probs, offsets, k) == 1.0


@settings(max_examples=100, deadline=None)
@given(cases())
def test_a_model_of_content_alone_has_no_preference_and_is_right_in_every_order_or_none(case):
    content, _, answers, offsets, k = case
    content = content + np.arange(content.shape[1]) * 1e-3  # one top content, no ties
    probs = _scores(content, np.zeros_like(content), offsets)
    assert position_preference(probs, offsets, k) == 0.0
    right = content.argmax(axis=1) == answers
    assert circular_accuracy(probs, offsets, answers, k) == pytest.approx(right.mean())


def test_order_interaction_is_the_paired_change_of_preference_under_corruption():
    offsets = np.tile(np.arange(3), (2, 1))
    k = np.full(2, 3)
    content = np.array([[3.0, 0, 0], [0, 3.0, 0]])
    clean = _scores(content, np.zeros((2, 3)), offsets)
    fallen = _scores(content * 0, np.array([[2.0, 0, 0], [2.0, 0, 0]]), offsets)
    assert order_interaction(clean, fallen, offsets, k) == 1.0  # the content lost, A won
    assert order_interaction(clean, clean, offsets, k) == 0.0
    with pytest.raises(ValueError, match="sample 0: option order needs >= 2 rotations"):
        position_preference(clean[:, :1], offsets[:, :1], k)


def test_the_embedded_model_scored_under_rotations_in_its_own_batches():
    """Rotation 0 is the query as given; the others are the same options in
    rotated order; circular accuracy never exceeds the single-order one."""
    import torch

    from benchc.data.synthetic import generate
    from benchc.metrics.options import option_probs
    from benchc.models.base import Query
    from benchc.models.collate import score
    from benchc.models.hf import HFBackend
    from benchc.models.rotations import score_rotations

    torch.set_num_threads(1)
    backend = HFBackend(str(REPO / "fixtures" / "tiny-vlm"), batch_size=8)
    samples = generate(4, 11)
    queries = [
        Query(np.asarray(s.image().convert("RGB")), s.question, s.options, s.hint, s.id)
        for s in samples
    ]
    got = score_rotations(backend, queries)
    k = np.array([len(s.options) for s in samples])
    assert got.probs.shape == (4, int(k.max()), int(k.max()))
    assert (got.offsets[:, 0] == 0).all()
    plain = score(backend, queries).option_logits
    # the same queries, in other batches: equal up to the kernels' batch-composition noise
    np.testing.assert_allclose(got.probs[:, 0], option_probs(plain, k), rtol=1e-3, atol=1e-6)
    answers = np.array([s.answer for s in samples])
    single = float((np.nanargmax(got.probs[:, 0], axis=1) == answers).mean())
    assert circular_accuracy(got.probs, got.offsets, answers, k) <= single
    with pytest.raises(ValueError, match="query 0: rotations need the sample id"):
        score_rotations(backend, [Query(queries[0].image, "q", ("a", "b"))])
