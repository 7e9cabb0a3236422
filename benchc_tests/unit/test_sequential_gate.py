"""The engine's group-sequential gate (``--looks K``): each gate's share of the budget spent over
the looks by Lan-DeMets alpha spending (one look is today's gate, bit for bit), early FAIL at a
look's boundary, early PASS below every futility bound, UNRESOLVED between the bounds, and
``benchc plan`` printing the schedule with the z the run uses."""

from __future__ import annotations

import math

import pytest
from scipy.special import ndtri

from benchc.gates.budget import ErrorBudget, look_fractions
from benchc.gates.design import _efficacy
from benchc.gates.engine import run_verdict
from benchc.gates.looks import after_look, sequential

GATES = {"model": 10, "cell": 90}


def test_one_look_is_todays_gate_bit_for_bit():
    b = ErrorBudget(0.01, GATES)
    assert b.z("model") == float(-ndtri(b.alpha_for("model")))
    assert b.information == (1.0,)


def test_the_looks_spend_each_gates_share_by_obrien_fleming():
    fixed = ErrorBudget(0.01, GATES)
    zs = [ErrorBudget(0.01, GATES, looks=3, look=k).z("model") for k in (1, 2, 3)]
    assert zs[0] > zs[1] > zs[2] > fixed.z("model")  # early looks are strict
    assert zs[2] < fixed.z("model") * 1.01  # the last look costs almost nothing
    # each look's bound is the exact boundary of the gate's whole share (not alpha / K)
    alpha = fixed.alpha_for("model")
    assert ErrorBudget(0.01, GATES, looks=3).alpha_for("model") == alpha
    assert zs == pytest.approx(list(_efficacy((1 / 3, 2 / 3, 1.0), alpha, "obf")))


def test_look_sizes_are_fixed_before_look_1_and_the_current_look_is_what_it_used():
    assert look_fractions(39, 115, 3, 1) == pytest.approx((39 / 115, 77 / 115, 1.0))
    assert look_fractions(77, 115, 3, 2) == pytest.approx((39 / 115, 77 / 115, 1.0))
    # fewer samples than the plan's earlier look: even steps up to this one
    assert look_fractions(20, 115, 3, 2) == pytest.approx((10 / 115, 20 / 115, 1.0))
    assert look_fractions(500, 115, 2, 1) == (1.0,)  # past the dataset: the design ends here
    assert ErrorBudget(0.01, GATES, looks=2, look=1, fractions=(1.0,)).z("model") == (
        ErrorBudget(0.01, GATES).z("model")
    )
    # the last look spends what is left, whatever it uses
    assert look_fractions(24, 32, 2, 2) == pytest.approx((16 / 32, 1.0))


def _record(worse: float, se: float, *, status: str = "pass", floor: float = 0.01) -> dict:
    return {"case": "test_model[ras]", "scope": "model", "level": "model", "figure": "ras",
            "direction": "higher", "status": status, "baseline": 0.5, "current": 0.5 - worse,
            "change": -worse, "se_diff": se, "se_null": 0.01, "floor": floor, "tolerance": 0.05,
            "mdr": 0.03, "z": 5.0, "n": 39, "n_available": 115}  # fmt: skip


def test_a_bit_identical_candidate_passes_at_the_first_look():
    budget = ErrorBudget(0.01, GATES, looks=3, look=1, fractions=look_fractions(39, 115, 3, 1))
    records = [_record(0.0, 0.0)]
    out, decision = sequential(records, budget)
    assert decision is not None and decision.verdict == "PASS"
    assert [r["status"] for r in out] == ["pass"]
    overall = run_verdict(records, budget=budget)
    assert overall.state == "pass"
    assert any("stopped at look 1 of 3" in r.text for r in overall.reasons)
    assert "PASS ends it" in after_look("pass", out, look=1, looks=3, command=str)[0]


def test_a_gate_between_its_bounds_takes_the_next_look():
    budget = ErrorBudget(0.01, GATES, looks=3, look=1, fractions=look_fractions(39, 115, 3, 1))
    records = [_record(0.03, 0.01)]  # worse by 3 SE: below c_1 ~ 6, above the futility bound
    out, decision = sequential(records, budget)
    assert decision.verdict == "CONTINUE"
    (rec,) = out
    assert rec["status"] == "unresolved" and rec["resolve_n"] == 77  # the planned second look
    overall = run_verdict(records, budget=budget)
    assert overall.state == "unresolved" and "the next look decides" in overall.reasons[0].text
    head, cmd = after_look("unresolved", out, look=1, looks=3, command=lambda n, k: f"{n} {k}")
    assert head.startswith("next look (2 of 3) with 77") and cmd.strip() == "77 2"


def test_a_fail_is_final_and_the_last_look_decides():
    budget = ErrorBudget(0.01, GATES, looks=3, look=3, fractions=look_fractions(115, 115, 3, 3))
    failed = [_record(0.2, 0.01, status="fail")]
    assert run_verdict(failed, budget=budget).state == "fail"
    clear = [_record(0.0, 0.01)]
    assert run_verdict(clear, budget=budget).state == "pass"


def test_the_last_look_judges_each_gate_as_a_fixed_gate_at_its_bound():
    """At the last look a record's own check (tolerance from this run's SE, UNRESOLVED only
    beyond its MDR, at z = c_K) stands: a change that a wider-than-planned SE leaves between
    the design's bounds PASSes as a fixed gate's does (benign bfloat16 noise on the zoo was
    UNRESOLVED there), and a record the check left UNRESOLVED stays so."""
    budget = ErrorBudget(0.01, GATES, looks=3, look=3, fractions=look_fractions(115, 115, 3, 3))
    wide = [_record(0.04, 0.03)]  # above c_K x the planned SE 0.01, inside c_K x 0.03
    out, decision = sequential(wide, budget)
    assert decision.states == ("unresolved",)  # between the design's own bounds
    assert [r["status"] for r in out] == ["pass"]  # but the gate itself passed: it stands
    assert run_verdict(wide, budget=budget).state == "pass"
    beyond = [_record(0.04, 0.03, status="unresolved")]
    assert run_verdict(beyond, budget=budget).state == "unresolved"
    earlier = ErrorBudget(0.01, GATES, looks=3, look=2, fractions=look_fractions(77, 115, 3, 2))
    out, _ = sequential([_record(0.04, 0.03)], earlier)  # before the last: the next look decides
    assert out[0]["status"] == "unresolved" and "next look decides" in out[0]["reason"]


def test_plan_prints_the_schedule_and_the_runs_z():
    from pathlib import Path

    from benchc.gates.plan import Grid, plan, schedule

    folder = Path(__file__).resolve().parents[2] / "thresholds" / "tiny-vlm"
    grid = Grid(("fog",), (1, 3), 39, 3)
    rows = plan(folder, grid=grid)
    model = [r for r in rows if r.level == "model"]
    want = ErrorBudget(0.01, {}, looks=3, look=1, fractions=look_fractions(39, 115, 3, 1))
    assert model[0].z == pytest.approx(
        float(_efficacy(want.information, 0.01 * 0.4 / 1.0 / len(model), "obf")[0]), rel=0.05
    )
    lines = schedule(rows, grid, 0.01, 115)
    assert lines[1].startswith("samples per look: 39, 77, 115")
    assert any("MDR_90%" in line for line in lines) and math.isfinite(model[0].mdr)


def test_a_workers_budget_reaches_the_controller_whole():
    budget = ErrorBudget(0.01, GATES, looks=3, look=2, fractions=look_fractions(77, 115, 3, 2))
    back = ErrorBudget.from_dict(budget.to_dict())
    assert back == budget and back.z("model") == budget.z("model")
