"""Gates: the figure table, rules and their merge, the false-alarm budget, and the paired check
(against a slow per-replicate reference), its MDR and its verdicts (docs/spec.md §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from benchc import spec
from benchc.gates import (
    FIGURES,
    ErrorBudget,
    GateRule,
    GridEvidence,
    Payload,
    RuleError,
    VSIEvidence,
    check,
    default_rules,
    describe,
    figure,
    figures,
    merge_rules,
    parse_rule,
    parse_rules,
)
from benchc.gates.evidence import Evidence
from benchc.gates.rules import check_rules
from benchc.metrics import compute_grid, grid_from_logits
from benchc.metrics.stats import bootstrap_indices, replicate_se
from benchc.metrics.vsi import probe_accuracy
from benchc.suite.payloads import build_payload, grid_payloads

Z3 = lambda level: 3.0  # noqa: E731 - a fixed z for tests that are not about the budget


# -- the figure table and rules ------------------------------------------------------------
def test_every_figure_is_defined_once_per_level_with_spec_directions():
    seen = {(f.level, f.name) for f in FIGURES}
    assert len(seen) == len(FIGURES)
    for f in FIGURES:
        lower = f.name in (
            "mixed_cell_rate",
            "gap",
            "insensitive_fraction",
            "negative_flips",
            "negative_flips_clean",
            "position_preference",
            "position_preference_clean",
            "order_interaction",
        )
        assert f.direction == ("lower" if lower else "higher"), f.name
        assert f.floor > 0
    # the family-level gates, and option order's (issue 52)
    assert {f.name for f in figures("family", gated_only=True)} == {
        "ras", "r_c", "r_w", "accuracy", "p_correct", "negative_flips",
        "circular_accuracy", "position_preference", "order_interaction",
    }  # fmt: skip
    # consistency falls under any change: reported everywhere, gated only at the model level
    assert not figure("cell", "consistency").gated and not figure("family", "consistency").gated
    with pytest.raises(KeyError, match="no cell-level figure 'gap'"):
        figure("cell", "gap")


def test_parse_rule_roundtrip_with_optional_z():
    rule = parse_rule("ras:higher:floor=0.02:z=3")
    assert rule == GateRule("ras", "higher", 0.02, 3.0)
    assert parse_rule(str(rule)) == rule
    assert parse_rule("gap:lower:floor=0.1") == GateRule("gap", "lower", 0.1, None)
    assert str(GateRule("gap", "lower", 0.1)) == "gap:lower:floor=0.1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ras", "expected 'figure:higher|lower"),
        ("ras:up", "direction 'up'"),
        ("ras:higher:floor=x", "floor='x' is not a number"),
        ("ras:higher:tol=1", "unknown part 'tol=1'"),
        ("ras:higher:floor=-1", "floor must be finite and >= 0"),
        ("ras:higher:z=nan", "z must be finite"),
    ],
)
def test_bad_rules_name_the_problem(text, message):
    with pytest.raises(RuleError, match=message.replace("|", r"\|")):
        parse_rule(text)


def test_duplicate_and_misdirected_rules_refused():
    with pytest.raises(RuleError, match="two gate rules for figure 'ras'"):
        parse_rules(["ras:higher", "ras:lower"])
    with pytest.raises(RuleError, match="ras is better higher"):
        check_rules([parse_rule("ras:lower:floor=1")], "cell", where="x.json")
    with pytest.raises(RuleError, match="names no model-level figure"):
        check_rules([parse_rule("ras_typo:higher")], "model", where="x.json")


def test_rerecording_merges_rules_hand_edits_survive_new_defaults_arrive():
    edited = (GateRule("ras", "higher", 0.5, 2.0),)  # an old snapshot with one hand-edited rule
    merged = merge_rules(edited, "family")
    assert merged[0] == edited[0]
    assert [r.figure for r in merged] == [
        "ras", "r_c", "r_w", "accuracy", "p_correct", "negative_flips",
        "circular_accuracy", "position_preference", "order_interaction",
    ]  # fmt: skip
    assert merged[1:] == default_rules("family")[1:]


# -- the false-alarm budget ------------------------------------------------------------------
def test_budget_is_weighted_bonferroni_over_the_gates_that_run():
    b = ErrorBudget(0.01, {"cell": 380, "family": 20, "model": 6, "vsi": 2})
    total = sum(b.alpha_for(lv) * n for lv, n in b.gates.items())
    assert total == pytest.approx(0.01)
    assert b.alpha_for("model") == pytest.approx(0.01 * 0.4 / 6)
    assert b.z("model") == pytest.approx(norm.isf(0.01 * 0.4 / 6))
    assert b.z("cell") > b.z("family") > b.z("model")
    # a subset run spends the same budget on fewer gates: each one gets a smaller z
    only_model = ErrorBudget(0.01, {"model": 6})
    assert only_model.alpha_for("model") == pytest.approx(0.01 / 6)
    with pytest.raises(ValueError, match="false-alarm budget"):
        ErrorBudget(1.5)


# -- the paired check ------------------------------------------------------------------------
def _grid(n=40, seed=0, conditions=("fog-1", "fog-2", "gaussian_noise-1", "gaussian_noise-2")):
    rng = np.random.default_rng(seed)
    answers = rng.integers(0, 4, size=n)
    clean = rng.normal(size=(n, 4)) * 1.5
    clean[np.arange(n), answers] += 1.5
    by = {c: clean + rng.normal(size=(n, 4)) * 0.8 for c in conditions}
    return GridEvidence.from_conditions(
        [f"s{i:03d}" for i in range(n)], answers, np.full(n, 4), clean, by
    )


def _payload(ev: Evidence, level="model", names=None, z_for=Z3) -> Payload:
    return build_payload(
        ev, level=level, scope=level, model="m", dataset="d", info={}, seed=0, z_for=z_for,
        names=names,
    )  # fmt: skip


def _slow_paired_se(base: GridEvidence, cur: GridEvidence, key: str, n_boot: int) -> float:
    """The definition, one replicate at a time: resample ids, recompute both grids from
    logits, difference the figure."""
    diffs = []
    for rows in bootstrap_indices(len(base.ids), n_boot, 0):
        figs = []
        for ev in (base, cur):
            g = grid_from_logits(
                ev.logits[rows], ev.answers[rows], ev.n_options[rows],
                n_severities=len(ev.severities), corruptions=ev.corruptions,
            )  # fmt: skip
            figs.append(g.model_figures()[key])
        diffs.append(figs[1] - figs[0])
    return float(replicate_se(np.array(diffs)))


@pytest.mark.parametrize("key", ["ras", "r_c", "r_w", "accuracy", "mixed_cell_rate"])
def test_paired_bootstrap_equals_the_slow_per_replicate_reference(key):
    base = _grid()
    cur = GridEvidence(
        base.ids, base.answers, base.n_options, base.conditions,
        base.logits * np.r_[1.0, 1.3, 1.6, 0.7, 0.5][None, :, None],
    )  # fmt: skip
    counts = np.zeros((60, 40))
    for b, rows in enumerate(bootstrap_indices(40, 60, 0)):
        np.add.at(counts[b], rows, 1)
    fast = float(replicate_se(cur.replicates(counts)[key] - base.replicates(counts)[key]))
    assert fast == pytest.approx(_slow_paired_se(base, cur, key, 60), rel=1e-9, abs=1e-12)


def test_identical_runs_pass_with_zero_paired_se_and_mdr_from_the_benign_reference():
    base = _payload(_grid(), names=["ras"])
    verdict = check(base, base, z_for=Z3)
    assert {o.status for o in verdict.outcomes} == {"pass"}
    (o,) = verdict.outcomes
    assert o.se_diff == 0.0 and o.tolerance == o.rule.floor
    assert o.se_null > 0 and o.mdr == pytest.approx(max(o.rule.floor, 3.0 * o.se_null))


def test_paired_test_sees_a_shift_the_unpaired_tolerance_cannot():
    """Every corrupted pair loses the same small amount of confidence in its right answer: the
    samples move together, so the paired SE is tiny while each side's own SE is large."""
    base_ev = _grid(n=60, seed=2)
    logits = base_ev.logits.copy()
    rows = np.arange(60)
    logits[rows, 1:, base_ev.answers] -= 0.35  # corrupted conditions only
    cur_ev = GridEvidence(base_ev.ids, base_ev.answers, base_ev.n_options, base_ev.conditions,
                          logits)  # fmt: skip
    base, cur = _payload(base_ev, names=["ras"]), _payload(cur_ev, names=["ras"])
    (o,) = check(base, cur, z_for=Z3).outcomes
    unpaired = 3.0 * math.hypot(base.figures["ras"].se, cur.figures["ras"].se)
    assert o.worse_by > o.tolerance and o.status == "fail"
    assert o.worse_by < unpaired  # the old independent-sides tolerance would have passed it
    assert o.movers and all(c < b for _, b, c in o.movers)
    text = "\n".join(describe(o, cur))
    for needed in ("gate FAIL: ras", "baseline", "tolerance", "paired SE", "minimal detectable"):
        assert needed in text


def test_moving_the_better_way_is_improved_never_fail():
    base_ev = _grid(n=60, seed=3)
    logits = base_ev.logits.copy()
    logits[np.arange(60), 1:, base_ev.answers] += 1.0
    cur_ev = GridEvidence(base_ev.ids, base_ev.answers, base_ev.n_options, base_ev.conditions,
                          logits)  # fmt: skip
    statuses = {o.spec.name: o.status for o in check(
        _payload(base_ev, "family"), _payload(cur_ev, "family"), z_for=Z3).outcomes}  # fmt: skip
    assert statuses["accuracy"] == "improved" and "fail" not in statuses.values()


def test_a_subset_run_is_checked_on_the_cells_both_sides_have():
    full = _payload(_grid(), names=["ras"])
    sub = _payload(_grid().restrict(["fog-1", "fog-2"]), names=["ras"])
    (o,) = check(full, sub, z_for=Z3).outcomes
    assert o.status == "pass" and "2 cells both sides have" in o.reason
    assert o.baseline == pytest.approx(sub.figures["ras"].value)


def test_different_samples_are_unchecked_with_the_reason():
    a, b = _payload(_grid(n=40), names=["ras"]), _payload(_grid(n=41), names=["ras"])
    (o,) = check(a, b, z_for=Z3).outcomes
    assert o.status == "unchecked" and "different samples" in o.reason
    (o,) = check(a, a.with_evidence(None), z_for=Z3).outcomes  # type: ignore[arg-type]
    assert o.status == "unchecked" and "no per-sample evidence" in o.reason


def test_undefined_baseline_is_unchecked_and_newly_undefined_current_fails():
    ev = _grid()
    everyone_right = GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, ev.logits.copy())
    everyone_right.logits[np.arange(40), 0, ev.answers] += 50  # clean always right: no R_w
    (o,) = check(_payload(everyone_right, names=["r_w"]), _payload(ev, names=["r_w"]),
                 z_for=Z3).outcomes  # fmt: skip
    assert o.status == "unchecked" and "undefined on the baseline" in o.reason
    (o,) = check(_payload(ev, names=["r_w"]), _payload(everyone_right, names=["r_w"]),
                 z_for=Z3).outcomes  # fmt: skip
    assert o.status == "fail" and "became undefined" in o.reason


def test_a_gate_that_cannot_fail_says_so_and_how_many_samples_it_needs():
    ev = _grid(n=12)
    (o,) = check(_payload(ev, names=["mixed_cell_rate"]), _payload(ev, names=["mixed_cell_rate"]),
                 z_for=lambda lv: 50.0).outcomes  # fmt: skip
    assert o.powerless and "cannot fail on this dataset" in o.powerless
    assert "more samples needed" in o.powerless
    (o,) = check(_payload(ev, names=["ras"]), _payload(ev, names=["ras"]), z_for=Z3,
                 rules=[GateRule("ras", "higher", 5.0)]).outcomes  # fmt: skip
    assert o.powerless and "floor 5 exceeds" in o.powerless


def test_a_gate_without_noise_names_its_resolution_not_one_more_sample():
    # every prediction far from a tie: a benign re-measurement moves nothing (paired SE 0), and
    # accuracy 1 of 6 right leaves less room (1/6 of pairs) than a share's MDR on 6 samples
    n = 6
    answers = np.zeros(n, dtype=np.int64)
    clean = np.full((n, 4), -20.0)
    clean[:, 1] = 20.0  # clean: all wrong
    bad = clean.copy()
    bad[0] = [20.0, -20.0, -20.0, -20.0]  # corrupted: one right
    ev = GridEvidence.from_conditions(
        [f"s{i}" for i in range(n)], answers, np.full(n, 4), clean, {"fog-1": bad}
    )
    (o,) = check(_payload(ev, names=["accuracy"]), _payload(ev, names=["accuracy"]),
                 z_for=Z3).outcomes  # fmt: skip
    assert o.se_null == 0 and o.powerless and "cannot fail on this dataset" in o.powerless
    assert "more samples needed" not in o.powerless
    assert "resolution on this dataset" in o.powerless


def test_rule_z_overrides_the_budget():
    base_ev = _grid(n=60, seed=2)
    p = _payload(base_ev, names=["ras"])
    (o,) = check(p, p, z_for=Z3, rules=[GateRule("ras", "higher", 0.0, 7.0)]).outcomes
    assert o.z == 7.0 and o.mdr == pytest.approx(7.0 * o.se_null)


# -- VSI evidence ------------------------------------------------------------------------------
def _vsi(n=300, seed=0, ignore=0.0):
    rng = np.random.default_rng(seed)
    vsi = rng.lognormal(-2.0, 1.5, size=n)
    changed = rng.random(n) < np.where(vsi > 0.05, 0.6, 0.3)
    probe = rng.choice([0.0, 0.5, 1.0], size=n, p=[0.1, 0.2, 0.7])
    if ignore:  # the LLM stops reacting on a share of samples, the tower still sees the blur
        hit = rng.random(n) < ignore
        vsi = np.where(hit, vsi * 1e-3, vsi)
        changed = np.where(hit, False, changed)
    return VSIEvidence([f"v{i}" for i in range(n)], vsi, changed, probe)


def test_vsi_gates_catch_a_vision_ignoring_llm():
    base = _payload(_vsi(), level="vsi")
    worse = _payload(_vsi(ignore=0.5), level="vsi")
    out = {o.spec.name: o for o in check(base, worse, z_for=Z3).outcomes}
    assert out["insensitive_fraction"].status == "fail"
    # the gap is read on the baseline's pool (docs/spec.md §5): its hit samples stop moving
    assert out["gap"].n == 300 and out["gap"].worse_by > 0.05
    assert "baseline's low-VSI pool" in out["gap"].reason
    assert {o.status for o in check(base, base, z_for=Z3).outcomes} == {"pass"}


def test_the_gap_gate_catches_a_frozen_argmax_on_the_baseline_pool():
    ev = _vsi()
    frozen = ev.replaced(changed=np.where(ev.pool, 0.0, ev.changed))
    out = {o.spec.name: o.status for o in check(
        _payload(ev, level="vsi"), _payload(frozen, level="vsi"), z_for=Z3).outcomes}  # fmt: skip
    assert out == {"insensitive_fraction": "pass", "gap": "fail"}


def test_the_current_run_is_re_probed_on_the_baseline_pool():
    rng = np.random.default_rng(3)
    n, f = 200, 6
    clean = rng.normal(size=(n, f))
    shift = np.zeros(f)
    shift[0] = 3.0
    arrays = {
        "vsi": rng.lognormal(-2.0, 1.5, size=n),
        "top1_clean": np.zeros(n, int),
        "top1_blur": (rng.random(n) < 0.3).astype(int),
        "features_clean": clean,
        "features_blur": clean + shift + rng.normal(scale=0.5, size=(n, f)),
    }
    ids = [f"s{i}" for i in range(n)]
    base = VSIEvidence.from_run(arrays, ids, support="full")
    moved = {**arrays, "vsi": arrays["vsi"] * rng.lognormal(0.0, 0.5, size=n)}
    cur = VSIEvidence.from_run(moved, ids, support="full")
    assert not np.array_equal(base.pool, cur.pool)
    paired, note = cur.paired_with(base)
    assert np.array_equal(paired.pool, base.pool) and "re-probed" in note
    # the refit is the probe of docs/spec.md §5 on the baseline's pool, with the run's features
    want = probe_accuracy(arrays["features_clean"][base.pool], arrays["features_blur"][base.pool])
    np.testing.assert_array_equal(paired.probe_correct[base.pool], want.correct)
    assert np.isnan(paired.probe_correct[~(base.pool | base.control)]).all()


def test_vsi_replicates_equal_the_definition():
    ev = _vsi(n=50)
    rows = bootstrap_indices(50, 2, 4)[0]
    counts = np.bincount(rows, minlength=50)[None].astype(float)
    rep = ev.replicates(counts)
    low = ev.vsi[rows] < spec.VSI_INSENSITIVE
    assert rep["insensitive_fraction"][0] == pytest.approx(low.mean())
    terms = (ev.probe_correct - ev.changed)[rows][ev.pool[rows]]
    assert rep["gap"][0] == pytest.approx(terms.mean())


# -- payloads ---------------------------------------------------------------------------------
def test_grid_payloads_cover_cells_families_and_model_figures():
    out = grid_payloads(_grid(), model="m", dataset="d", info={}, seed=0, z_for=Z3)
    assert set(out) == {
        "cell:fog-1", "cell:fog-2", "cell:gaussian_noise-1", "cell:gaussian_noise-2",
        "family:weather", "family:noise",
        *(f"model:{f.name}" for f in figures("model", gated_only=True)),
    }  # fmt: skip
    noise = out["family:noise"]
    g = compute_grid(
        _grid().logits[:, 0], _grid().logits[:, 3:5].reshape(40, 1, 2, 4), _grid().answers
    )
    assert noise.figures["ras"].value == pytest.approx(g.figure("ras"))
    assert noise.figures["accuracy"].mdr >= 0.02  # the family accuracy floor


def test_payload_json_roundtrip_names_the_sidecar():
    p = _payload(_grid(), "family")
    text = p.to_json(evidence_file="arrays/x.npz")
    back = Payload.from_json(text)
    assert back.evidence_digest == p.evidence.digest and back.evidence_file == "arrays/x.npz"
    assert back.figures.keys() == p.figures.keys() and back.rules == tuple(p.rules)
    with pytest.raises(ValueError, match="format 1, this benchc reads format 2"):
        Payload.from_json('{"benchc_snapshot": 1}')


def test_budget_over_payloads_counts_each_case_rules_as_its_gates():
    """Offline re-checks (``benchc report``) build one payload per case; the budget must count
    the same gates pytest counts: 6 per cell, 9 per family, 1 per model-level case."""
    cases = grid_payloads(_grid(), model="m", dataset="d", info={}, seed=0, z_for=Z3)
    b = ErrorBudget.for_payloads(0.01, cases.values())
    assert dict(b.gates) == {"cell": 4 * 6, "family": 2 * 9, "model": 15}
    assert b.z("model") == pytest.approx(ErrorBudget(0.01, dict(b.gates)).z("model"))


def test_the_re_probe_on_a_baseline_pool_is_fitted_once_per_pair():
    rng = np.random.default_rng(4)
    n = 120
    clean = rng.normal(size=(n, 5))
    arrays = {
        "vsi": rng.lognormal(-2.0, 1.5, size=n),
        "top1_clean": np.zeros(n, int),
        "top1_blur": (rng.random(n) < 0.3).astype(int),
        "features_clean": clean,
        "features_blur": clean + 1.0 + rng.normal(scale=0.5, size=(n, 5)),
    }
    ids = [f"s{i}" for i in range(n)]
    base = VSIEvidence.from_run(arrays, ids, support="full")
    cur = VSIEvidence.from_run({**arrays, "vsi": arrays["vsi"][::-1].copy()}, ids, support="full")
    first, _ = cur.paired_with(base)
    again, _ = cur.paired_with(base)
    assert again is first  # the second VSI case of the run reuses the fit
    fresh = cur.probed(base.pool, base.control)
    np.testing.assert_array_equal(first.probe_correct, fresh.probe_correct)
    # other features (another model's tower) are never served the cached fit
    moved = {**arrays, "features_blur": arrays["features_blur"] + 0.1}
    other = VSIEvidence.from_run({**moved, "vsi": cur.vsi}, ids, support="full")
    assert other.paired_with(base)[0] is not first
