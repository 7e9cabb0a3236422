"""Gate rules and the one-sided comparison of SPEC section 6."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchc.gates import (
    DEFAULT_CELL_RULES,
    DEFAULT_MODEL_RULES,
    Figure,
    GateRule,
    Payload,
    RuleError,
    compare,
    evaluate,
    parse_rule,
    parse_rules,
    report,
)


def test_parse_rule_roundtrip():
    rule = parse_rule("ras:higher:floor=0.02:z=3")
    assert rule == GateRule("ras", "higher", 0.02, 3.0)
    assert parse_rule(str(rule)) == rule
    assert parse_rule("gap:lower:z=2:floor=0.1") == GateRule("gap", "lower", 0.1, 2.0)
    assert parse_rule("gap:lower") == GateRule("gap", "lower", 0.0, 0.0)


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


def test_duplicate_rules_refused():
    with pytest.raises(RuleError, match="two gate rules for figure 'ras'"):
        parse_rules(["ras:higher", "ras:lower"])


def test_default_rules_parse_and_follow_spec_directions():
    cell = parse_rules(list(DEFAULT_CELL_RULES))
    model = parse_rules(list(DEFAULT_MODEL_RULES))
    for name in ("ras", "r_c", "accuracy", "consistency", "relative_robustness"):
        assert cell[name].direction == "higher"
    for name in ("mixed_cell_rate", "gap", "insensitive_fraction"):
        assert model[name].direction == "lower"


def test_tolerance_is_max_of_floor_and_z_combined_se():
    rule = GateRule("ras", "higher", 0.02, 3.0)
    assert rule.tolerance(0.0, 0.0) == 0.02
    assert math.isclose(rule.tolerance(0.03, 0.04), 0.15)
    assert rule.tolerance(float("nan"), 0.01) == pytest.approx(0.03)


def test_one_sided_higher_is_better():
    rule = GateRule("ras", "higher", 0.05, 0.0)
    base = Figure(0.5, 0.0)
    assert evaluate(rule, base, Figure(0.44, 0.0)).status == "fail"
    assert evaluate(rule, base, Figure(0.46, 0.0)).status == "pass"
    assert evaluate(rule, base, Figure(0.9, 0.0)).status == "improved"


def test_one_sided_lower_is_better():
    rule = GateRule("gap", "lower", 0.05, 0.0)
    base = Figure(0.5, 0.0)
    assert evaluate(rule, base, Figure(0.56, 0.0)).status == "fail"
    assert evaluate(rule, base, Figure(0.1, 0.0)).status == "improved"


def test_undefined_figures():
    rule = GateRule("r_w", "higher", 0.05, 0.0)
    assert evaluate(rule, Figure(float("nan"), 0), Figure(0.1, 0)).status == "undefined"


@given(
    base=st.floats(-2, 1),
    delta=st.floats(-3, 3),
    floor=st.floats(0, 1),
    z=st.floats(0, 5),
    se=st.floats(0, 0.5),
    direction=st.sampled_from(["higher", "lower"]),
)
def test_moving_in_the_better_direction_never_fails(base, delta, floor, z, se, direction):
    rule = GateRule("f", direction, floor, z)
    better = base + rule.sign * abs(delta)
    assert evaluate(rule, Figure(base, se), Figure(better, se)).status != "fail"


def _payload(value: float, ras: list[float], scope: str = "fog-3") -> Payload:
    return Payload(
        scope=scope,
        model="tiny",
        dataset="testbed",
        n=len(ras),
        figures={"ras": Figure(value, 0.01, per_sample="ras")},
        rules=[parse_rule("ras:higher:floor=0.02:z=3")],
        ids=[f"q{i}" for i in range(len(ras))],
        per_sample={"ras": ras},
    )


def test_payload_json_roundtrip_is_stable():
    p = _payload(0.1234567891, [0.1, float("nan"), -0.3])
    text = p.to_json()
    q = Payload.from_json(text)
    assert q.figures["ras"].value == pytest.approx(0.123457)
    assert math.isnan(q.per_sample["ras"][1])
    assert q.to_json() == text


def test_from_json_rejects_foreign_files():
    with pytest.raises(ValueError, match="not valid JSON"):
        Payload.from_json("{", where="x.json")
    with pytest.raises(ValueError, match="not a benchc threshold snapshot"):
        Payload.from_json('{"a": 1}')


def test_failure_message_names_everything():
    base = _payload(0.30, [0.3, 0.3, 0.3, 0.3])
    cur = _payload(0.10, [0.3, -0.5, 0.25, 0.2])
    outcomes = compare(base, cur)
    assert [o.status for o in outcomes] == ["fail"]
    text = "\n".join(report(base, cur))
    assert "ras in fog-3" in text
    assert "baseline 0.3000" in text and "current 0.1000" in text
    assert "tolerance 0.0424" in text  # 3 * sqrt(2) * 0.01 > floor 0.02
    movers = text.split("samples that moved most")[1]
    assert movers.index("q1") < movers.index("q3") < movers.index("q2")
    assert "q0" not in movers  # unchanged samples are not listed


def test_improvement_is_reported_not_failed():
    base = _payload(0.10, [0.1, 0.1])
    cur = _payload(0.50, [0.5, 0.5])
    assert [o.status for o in compare(base, cur)] == ["improved"]
    assert "improved (not a failure)" in report(base, cur)[0]


def test_missing_figure_fails():
    base = _payload(0.1, [0.1])
    cur = Payload("fog-3", "tiny", "testbed", 1, {}, base.rules)
    assert compare(base, cur)[0].status == "fail"
