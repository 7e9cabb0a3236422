"""Option order through the gate evidence: the rotated conditions a selection scores, the order
figures a grid computes (hypothesis invariants at the grid level), and rotations surviving every
operation a gate applies to evidence (take, restrict, align, benign, the sidecar)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchc import spec
from benchc.gates import GridEvidence
from benchc.gates.evidence import OrderLogits
from benchc.gates.figures import reads_rotations
from benchc.metrics.position import order_pairs
from benchc.testing.dev.zoo import content_rotations, position_bias

ORDER_FIGURES = ("circular_accuracy", "circular_accuracy_clean", "position_preference",
                 "position_preference_clean", "order_interaction")  # fmt: skip


def _grid(n: int = 60, k: int = 4, seed: int = 0, cells=("fog-1", "fog-3", "fog-5")):
    rng = np.random.default_rng(seed)
    answers = rng.integers(0, k, n)
    clean = rng.normal(size=(n, k)).astype(np.float32)
    clean[np.arange(n), answers] += 1.0
    by = {c: clean + rng.normal(0, 0.8, (n, k)).astype(np.float32) for c in cells}
    return GridEvidence.from_conditions([f"s{i}" for i in range(n)], answers, np.full(n, k),
                                        clean, by)  # fmt: skip


def test_the_rotated_conditions_are_clean_and_one_severity_per_corruption():
    assert spec.order_conditions(["fog-1", "fog-3", "fog-5", "snow-2", "snow-4"]) == [
        "clean", "fog-3", "snow-2"  # 3 where selected, else the nearest (ties: the lower)
    ]  # fmt: skip
    assert spec.order_conditions(["pixelate-5"]) == ["clean", "pixelate-5"]
    # the selection alone decides: a subset keeps the rotated cell of the baseline's grid
    assert "fog-3" in spec.order_conditions(["fog-3"])


def test_only_cases_that_gate_an_order_figure_carry_rotations():
    assert reads_rotations("model") and reads_rotations("family")
    assert reads_rotations("model", ["circular_accuracy"]) and not reads_rotations("model", ["ras"])
    assert not reads_rotations("cell")


def test_a_grid_without_rotations_leaves_the_order_figures_undefined_never_zero():
    f = _grid().figures()
    assert all(np.isnan(f[name]) for name in ORDER_FIGURES)


def test_a_content_model_is_circular_where_it_is_right_and_prefers_no_position():
    ev = content_rotations(_grid())
    f, g = ev.figures(), ev.grid
    # every rotation reads the same content: right in every order exactly where right in one
    assert f["circular_accuracy_clean"] == pytest.approx(g.correct_clean.mean())
    on = g.order_on
    assert f["circular_accuracy"] == pytest.approx(g.correct[on].mean())
    assert f["position_preference"] == 0.0 and f["order_interaction"] == 0.0
    assert on.sum() == len(ev.ids) and on[:, 0, 1].all()  # fog-3 only, every sample


def test_a_position_only_model_has_circular_accuracy_0_and_preference_1():
    ev = _grid(k=4)
    n = len(ev.ids)
    logits = np.broadcast_to(np.array([3.0, 1.0, 0.0, -1.0], np.float32), ev.logits.shape)
    base = GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, logits.copy())
    ev = content_rotations(base)
    order = ev.order
    assert order is not None
    same = np.broadcast_to(logits[:, :1, None, :], order.logits.shape).copy()  # position only
    ev = GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, ev.logits,
                      order=OrderLogits(order.conditions, same, order.offsets))  # fmt: skip
    f = ev.figures()
    assert f["circular_accuracy"] == 0.0 and f["circular_accuracy_clean"] == 0.0
    assert f["position_preference"] == 1.0 and f["position_preference_clean"] == 1.0
    assert f["order_interaction"] == 0.0 and n == 60


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    k=st.integers(2, 6),
    bias=st.floats(0.0, 3.0),
    noise=st.floats(0.0, 2.0),
)
def test_circular_accuracy_never_exceeds_single_order_accuracy(seed, k, bias, noise):
    ev = position_bias(content_rotations(_grid(n=30, k=k, seed=seed), sd=noise, seed=seed), bias)
    f, g = ev.figures(), ev.grid
    assert f["circular_accuracy_clean"] <= g.correct_clean.mean() + 1e-12
    assert f["circular_accuracy"] <= g.correct[g.order_on].mean() + 1e-12
    assert 0.0 <= f["position_preference"] <= 1.0


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(2, 6), first=st.integers(1, 5))
def test_the_figures_do_not_depend_on_which_rotation_is_called_the_first(seed, k, first):
    """Name rotation ``first`` the given order: contents, answers and offsets relabel together,
    and each sample's circular correctness and position spread stay what they were."""
    first %= k
    rng = np.random.default_rng(seed)
    m = 25
    offsets = np.tile(np.arange(k), (m, 1))
    logits = rng.normal(size=(m, k, k)).astype(np.float32)  # (sample, rotation slot, position)
    answers = rng.integers(0, k, m)
    n_options = np.full(m, k)
    before = order_pairs(logits[:, 0], logits[:, 1:], offsets, answers, n_options)
    # relabelled: content c' = (c - first) mod K, so rotation r becomes r - first
    slots = [(first + j) % k for j in range(k)]  # slot j of the new labelling: old rotation
    new = logits[:, slots]
    after = order_pairs(new[:, 0], new[:, 1:], offsets, (answers - first) % k, n_options)
    assert np.array_equal(before[1], after[1]) and np.allclose(before[2], after[2])


def test_rotations_survive_take_restrict_align_benign_and_the_sidecar(tmp_path):
    from benchc.gates import sidecar

    ev = content_rotations(_grid(), sd=0.3)
    rows = np.array([3, 3, 1, 0])
    taken = ev.take(rows, ids=["a", "b", "c", "d"])
    assert taken.order is not None and np.array_equal(taken.order.offsets, ev.order.offsets[rows])
    sub = ev.restrict(["fog-1", "fog-3"])
    assert sub.order is not None and sub.order.conditions == ("clean", "fog-3")
    assert ev.restrict(["fog-1"]).order.conditions == ("clean",)
    assert ev.without_order().order is None
    aligned = ev.align(list(reversed(ev.ids)))
    assert aligned.figures()["circular_accuracy"] == ev.figures()["circular_accuracy"]
    benign = ev.benign(7)
    assert not np.array_equal(benign.order.logits, ev.order.logits)
    # the grid's own noise is the same with or without rotations: every other figure's MDR too
    assert np.array_equal(benign.logits, ev.without_order().benign(7).logits)
    rel = sidecar.save(tmp_path, ev)
    back = sidecar.load(tmp_path, rel, ev.digest, where="test")
    assert back.digest == ev.digest and back.order.conditions == ev.order.conditions
    f, g = back.figures(), ev.figures()
    assert all(f[k] == g[k] for k in ORDER_FIGURES)


def test_rotations_of_conditions_outside_the_grid_are_refused():
    ev = content_rotations(_grid())
    bad = OrderLogits(("clean", "snow-3"), ev.order.logits, ev.order.offsets)
    with pytest.raises(ValueError, match="rotated conditions not in the grid"):
        GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, ev.logits, order=bad)


def test_the_run_plans_the_rotations_its_selected_cases_read_and_counts_their_queries():
    """``-k`` decides which rotated conditions are scored (a family its own, a model-level
    option-order gate all of them, a cell none), and the progress total counts their queries."""
    from types import SimpleNamespace

    from benchc.suite.collect import planned_rotations

    def item(**params):
        return SimpleNamespace(callspec=SimpleNamespace(params=params))

    grid = ["fog-1", "fog-3", "gaussian_noise-3", "gaussian_noise-5"]
    assert planned_rotations([item(benchc_cell="fog-3")], grid) == []
    assert planned_rotations([item(benchc_model_figure="ras")], grid) == []
    assert planned_rotations([item(benchc_family="weather")], grid) == ["clean", "fog-3"]
    every = planned_rotations([item(benchc_model_figure="position_preference")], grid)
    assert every == ["clean", "fog-3", "gaussian_noise-3"]


def test_pending_queries_count_each_rotation_once():
    from types import SimpleNamespace

    from benchc.suite.run import SuiteRun

    run = SuiteRun.__new__(SuiteRun)  # only its store and dataset are read
    run.store = SimpleNamespace(has=lambda name: name == "order.clean")  # clean's are stored
    run.dataset = type("D", (), {"n_options": np.array([2, 4, 7]), "__len__": lambda _: 3})()
    # fog-3: 3 samples in the given order, and 1 + 3 + 5 other rotations (K = 2, 4, 7 -> 6)
    assert run.pending_queries(["fog-3"], ["clean", "fog-3"]) == 3 + 9


def test_plan_lists_the_option_order_gates_with_the_mdrs_the_baseline_recorded():
    from pathlib import Path

    from benchc.gates.plan import plan
    from benchc.gates.snapshot import load_baseline

    folder = Path(__file__).resolve().parents[2] / "thresholds" / "tiny-vlm"
    rows = {(r.level, r.scope, r.figure): r for r in plan(folder)}
    for name in ORDER_FIGURES:
        recorded = load_baseline(folder / f"model-{name}.json").figures[name].mdr
        assert rows[("model", "model", name)].mdr == pytest.approx(recorded, abs=1e-6), name
    family = load_baseline(folder / "family-weather.json")
    for name in ("circular_accuracy", "position_preference", "order_interaction"):
        assert rows[("family", "weather", name)].mdr == pytest.approx(
            family.figures[name].mdr, abs=1e-6
        )
