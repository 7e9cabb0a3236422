"""The gate engine owns every decision: the verdict table, how a run ended, the summary's
headings, the sequential looks, the snapshot each gate reads, and the settings every printed
command carries. Pure parts here; ``test_verdict_table.py`` drives every state through real
pytest processes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from benchc.gates.baselines import BaselineRef, snapshot_stem
from benchc.gates.engine import run_verdict
from benchc.gates.looks import after_look, coverage, header
from benchc.gates.states import (
    EXIT_CRASHED,
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INFRA,
    EXIT_INTERRUPTED,
    EXIT_OK,
    TABLE,
    Policy,
    exit_code,
)
from benchc.gates.verdict import Ending, Overall, Progress

REPO = Path(__file__).resolve().parents[2]
POLICIES = {
    "default": Policy(),
    "strict": Policy(strict=True),
    "strict+warn": Policy(strict=True, inconclusive="warn"),
    "fail": Policy(inconclusive="fail"),
}


def _record(status: str, figure: str = "ras", level: str = "model", **kw) -> dict:
    base = {"case": f"test_{level}[{figure}]", "scope": level, "level": level, "figure": figure,
            "status": status, "baseline": 0.5, "current": 0.4, "tolerance": 0.05, "mdr": 0.03,
            "n": 40, "n_available": 115, "z": 3.0, "se_diff": 0.02}  # fmt: skip
    return {**base, **kw}


@pytest.mark.parametrize("name", list(POLICIES))
def test_every_state_has_one_exit_code_per_policy(name):
    policy = POLICIES[name]
    want = {"pass": EXIT_OK, "recorded": EXIT_OK, "fail": EXIT_FAIL,
            "interrupted": EXIT_INTERRUPTED, "crashed": EXIT_CRASHED, "infra": EXIT_INFRA,
            "usage": 4}  # fmt: skip
    doubtful = EXIT_INCONCLUSIVE if policy.mode == "fail" else EXIT_OK
    want.update(unresolved=doubtful, inconclusive=doubtful)
    assert {r.state: exit_code(r.state, policy) for r in TABLE} == want
    # no state outside a regression shares the regression's code
    assert [r.state for r in TABLE if exit_code(r.state, policy) == EXIT_FAIL] == ["fail"]


def test_strict_gates_with_inconclusive_warn_opts_out_of_exit_6():
    unresolved = run_verdict([_record("unresolved", resolve_n=300)], policy=Policy(True, "warn"))
    assert unresolved.state == "unresolved" and unresolved.exit_code == EXIT_OK
    strict = run_verdict([_record("unresolved")], policy=Policy(True))
    assert strict.exit_code == 6
    # read back from report.json it says which option made it 6
    back = Overall.from_dict(strict.to_dict())
    assert back.exit_code == 6 and back.lines()[-1].startswith("  exit status 6: under --strict")


def test_a_run_that_did_not_finish_never_says_pass():
    progress = Progress(3, 21, "pytest benchc_tests/suite")
    passed = [_record("pass", current=0.5)]
    stopped = run_verdict(passed, ending=Ending(interrupted="by the user", progress=progress))
    assert stopped.state == "interrupted" and "PASS" not in stopped.headline
    assert stopped.exit_code == EXIT_INTERRUPTED and "3 of 21" in stopped.headline
    assert stopped.to_dict()["progress"]["resume"] == "pytest benchc_tests/suite"
    # a fault outside the model wins over everything, and is never a regression's code
    infra = run_verdict([_record("fail")], ending=Ending(infra="http://x: 500 after 7 tries"))
    assert infra.state == "infra" and infra.exit_code == EXIT_INFRA
    # pytest stopping after a FAIL (-x) keeps the FAIL; Ctrl-C does not
    failed = [_record("fail")]
    assert run_verdict(failed, ending=Ending(interrupted="-x", by_user=False)).state == "fail"
    assert run_verdict(failed, ending=Ending(interrupted="ctrl-c")).state == "interrupted"


def test_cases_that_raised_crash_the_run_unless_a_gate_failed():
    errored = [{"case": "test_cell[fog-1]", "error": "ValueError: size 224"}]
    crashed = run_verdict([_record("pass")], ending=Ending(errored))
    assert crashed.state == "crashed" and crashed.exit_code == EXIT_CRASHED
    assert run_verdict([_record("fail")], ending=Ending(errored)).state == "fail"
    assert run_verdict([], ending=Ending(errored)).state == "crashed"


def test_the_summary_groups_reasons_under_headings():
    records = [
        _record("fail", "r_w"),
        _record("unresolved", "accuracy", resolve_n=380),
        _record("unchecked", "gap", "vsi", reason="VSI not applicable"),
    ]
    lines = run_verdict(records, policy=Policy(strict=True)).lines()
    heads = [line.strip() for line in lines if line.startswith("  ") and line.endswith(":")]
    assert heads == [
        "failed gates:",
        "unresolved gates (more samples resolve them):",
        "unchecked gates:",
    ]
    failed = lines[lines.index("  failed gates:") + 1]
    assert failed.startswith("    - r_w in model")


def test_no_gate_covers_it_only_when_none_does():
    from benchc.gates.facts import Facts
    from benchc.gates.paired import Difference
    from benchc.metrics.figures import definition

    drop = Difference(definition("acc_clean"), 0.739, 0.470, 0.02, 115)
    facts = Facts(n=115, changes=(drop,))
    caught = [_record("fail", "p_correct_clean"), _record("pass", "accuracy")]
    text = " ".join(r.text for r in run_verdict(caught, facts=facts).reasons)
    assert "no gate covers it" not in text
    alone = [_record("pass", "accuracy", current=0.5)]
    text = " ".join(r.text for r in run_verdict(alone, facts=facts).reasons)
    assert "clean" in text.lower() and "no gate covers it" in text


def _cmd(limit, look):
    return f"pytest --limit={limit} --look={look}"


def test_looks_fail_is_final_and_pass_ends_the_design():
    recs = [_record("fail")]
    assert "FAIL is final" in after_look("fail", recs, look=1, looks=3, command=_cmd)[0]
    lines = after_look("pass", [_record("pass")], look=1, looks=3, command=_cmd)
    assert not any("next look (" in line for line in lines) and "PASS ends it" in lines[0]


def test_an_undecided_look_with_samples_left_prints_the_next_one():
    recs = [_record("pass", n=60, n_available=115)]
    for state in ("unresolved", "inconclusive"):
        head, cmd = after_look(state, recs, look=1, looks=2, command=_cmd)
        assert head.startswith("next look (2 of 2) with 115 of the dataset's 115")
        assert cmd.strip() == "pytest --limit=None --look=2"
    # three looks: the samples left split over the looks left, or what a gate needs
    three = after_look("inconclusive", recs, look=1, looks=3, command=_cmd)
    assert "--limit=88" in three[1]
    need = [_record("unresolved", n=60, n_available=115, resolve_n=100)]
    assert "--limit=100" in after_look("unresolved", need, look=1, looks=3, command=_cmd)[1]


def test_a_look_past_the_dataset_says_the_design_ended():
    recs = [_record("unresolved", n=115, n_available=115, resolve_n=370)]
    (line,) = after_look("unresolved", recs, look=1, looks=2, command=_cmd)
    assert "design has ended at look 1 of 2" in line and "UNRESOLVED stands" in line
    head = header(1, 2, 200, coverage(recs))
    assert "115 of the dataset's 115 samples" in head and "past the dataset" in head


def test_the_vsi_share_of_a_look_is_stated():
    recs = [_record("pass", n=60), _record("pass", "gap", "vsi", n=60, n_available=1000)]
    assert "60 of the VSI set's 1000" in header(1, 2, 60, coverage(recs))
    head = after_look("inconclusive", recs, look=1, looks=2, command=_cmd)[0]
    assert "VSI set's 1000 of its 1000" in head


def test_snapshots_are_named_after_their_gate_and_old_names_still_read(tmp_path):
    ref = BaselineRef("release", tmp_path)
    assert ref.snapshot("cell", "fog-3") == tmp_path / "cell-fog-3.json"
    legacy = tmp_path / "test_model-ras.json"
    legacy.write_text("{}")
    assert ref.snapshot("model", "ras") == legacy  # a folder recorded before keeps working
    (tmp_path / "model-ras.json").write_text("{}")
    assert ref.snapshot("model", "ras") == tmp_path / "model-ras.json"
    assert snapshot_stem("family", "noise") == "family-noise"


def test_a_setting_declared_once_is_in_the_config_the_commands_and_plan():
    from dataclasses import fields, replace

    from benchc.suite.config import config_class
    from benchc.suite.options import OPTIONS, Option, option_args

    knob = Option("--probe-layers", "probe_layers", "test knob", default=2, type=int,
                  carried=True, plan=True)  # fmt: skip
    options = (*OPTIONS, knob)
    cls = config_class(options)
    assert "probe_layers" in {f.name for f in fields(cls)} and cls().probe_layers == 2
    cfg = replace(cls(), probe_layers=5)
    args = option_args({f.name: getattr(cfg, f.name) for f in fields(cfg)}, options=options)
    assert "--probe-layers=5" in args
    assert option_args({"probe_layers": 2}, options=options) == []  # a default is left out
    assert [o.field for o in options if o.plan][-1] == "probe_layers"


def test_plan_cli_takes_every_plan_option_of_the_table():
    from benchc.suite.options import OPTIONS

    src = (REPO / "benchc" / "cli.py").read_text()
    assert "o.plan" in src
    assert {o.flag for o in OPTIONS if o.plan} == {
        "--corruptions", "--severities", "--limit", "--looks", "--false-alarm-budget",
    }  # fmt: skip


#: What decides a gate or a verdict: only the engine (benchc/gates) calls these.
DECIDERS = {
    "benchc.gates.check": {"check", "describe", "minimal_detectable"},
    "benchc.gates.pipeline": {"check_case"},
    "benchc.gates.verdict": {"decide", "conclude"},
    "benchc.gates.samples": {"sample_verdicts"},
    "benchc.gates": {"check", "describe"},
}


def test_clients_reach_gates_only_through_the_engine():
    offenders = []
    for path in sorted((REPO / "benchc").rglob("*.py")):
        rel = path.relative_to(REPO)
        if rel.parts[1] == "gates":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in DECIDERS:
                bad = {a.name for a in node.names} & DECIDERS[node.module]
                offenders += [f"{rel}: {node.module}.{name}" for name in sorted(bad)]
    assert not offenders, offenders


def test_no_function_in_gates_suite_or_report_is_over_60_lines():
    long = []
    for package in ("gates", "suite", "report"):
        for path in sorted((REPO / "benchc" / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                    if lines > 60:
                        long.append(f"{path.relative_to(REPO)}:{node.name} ({lines})")
    assert not long, long


def test_a_samples_drill_down_on_a_limit_run_compares_its_own_samples(tmp_path):
    """``--limit`` with ``--per-sample`` (the drill-down a failure prints): the cell snapshot
    holds all the baseline's samples, the run its first ones; each sample's verdict is a gate
    record the run's verdict counts (it raised "the two sides hold different samples")."""
    import numpy as np

    from benchc.gates import GridEvidence, Payload, default_rules, sidecar
    from benchc.gates.budget import ErrorBudget
    from benchc.gates.engine import GateEngine

    rng = np.random.default_rng(0)
    n = 30
    answers = rng.integers(0, 4, n)
    clean = rng.normal(size=(n, 4)).astype(np.float32) * 3
    fog = clean + rng.normal(size=(n, 4)).astype(np.float32)
    ids = [f"s{i}" for i in range(n)]
    ev = GridEvidence.from_conditions(ids, answers, np.full(n, 4), clean, {"fog-1": fog})
    cell = Payload("fog-1", "cell", "m", "d", n, {}, default_rules("cell"), {}, ev)
    ref = BaselineRef("m", tmp_path / "m")
    ref.folder.mkdir()
    rel = sidecar.save(ref.folder, ev)
    ref.snapshot("cell", "fog-1").write_text(cell.to_json(evidence_file=rel))
    current = ev.take(np.arange(12))  # the first 12 samples, unchanged
    engine = GateEngine(ref, budget=ErrorBudget(0.01, {"sample": 12}))
    decision = engine.decide_sample("fog-1", "s3", current, "test_sample[fog-1-s3]")
    (record,) = decision.records
    assert decision.action in ("pass", "skip") and record["level"] == "sample"
    assert record["scope"] == "fog-1:s3" and record["status"] in ("pass", "unchecked")


def test_accepting_a_model_level_change_records_over_the_baselines_grid():
    """A subset run's "if this change is intended" command for a model-level case records
    over the grid the baseline holds (a subset recording keeps the larger one as it was, so the
    command would not take); a cell's records its own cell."""
    from dataclasses import replace

    from benchc.suite.config import SuiteConfig
    from benchc.suite.gate import accept_command

    ref = BaselineRef("tiny-vlm", REPO / "thresholds" / "tiny-vlm")
    cfg = replace(SuiteConfig(), corruptions=("fog",), severities=(1, 3), limit=60)
    model = accept_command(cfg, ref, "test_model[accuracy]")
    assert "--corruptions" not in model and "--severities" not in model  # the whole grid
    assert "--snapshot-update" in model and "--limit" not in model
    cell = accept_command(cfg, ref, "test_cell[fog-1]")
    assert "--corruptions=fog" in cell and "--severities=1,3" in cell


def test_a_family_snapshot_that_predates_a_gate_is_a_usage_error_not_a_silent_pass(tmp_path):
    """A family snapshot recorded before the option-order gates existed has no rule for them:
    the case says which gates it predates and how to re-record, never passes them unchecked;
    re-recording (rules merged) brings them in."""
    import numpy as np

    from benchc.gates import GridEvidence, Payload, default_rules, sidecar
    from benchc.gates.budget import ErrorBudget
    from benchc.gates.engine import Commands, GateEngine
    from benchc.gates.rules import merge_rules
    from benchc.testing.dev.zoo import content_rotations

    rng = np.random.default_rng(0)
    n = 40
    answers = rng.integers(0, 4, n)
    clean = rng.normal(size=(n, 4)).astype(np.float32) * 3
    cells = {f"fog-{s}": clean + rng.normal(size=(n, 4)).astype(np.float32) for s in (1, 3)}
    ids = [f"s{i}" for i in range(n)]
    ev = content_rotations(GridEvidence.from_conditions(ids, answers, np.full(n, 4), clean, cells))
    rules = default_rules("family")
    old = tuple(r for r in rules if r.figure not in ("circular_accuracy", "position_preference",
                                                     "order_interaction"))  # fmt: skip
    ref = BaselineRef("m", tmp_path / "m")
    ref.folder.mkdir()
    rel = sidecar.save(ref.folder, ev)
    snap = Payload("weather", "family", "m", "d", n, {}, old, {}, ev)
    ref.snapshot("family", "weather").write_text(snap.to_json(evidence_file=rel))
    again = Commands(record_release=lambda: "pytest --snapshot-update X")
    engine = GateEngine(ref, budget=ErrorBudget(0.01, {"family": len(rules)}), commands=again)
    current = Payload("weather", "family", "m", "d", n, {}, rules, {}, ev)
    decision = engine.decide_case(current, "test_family[weather]")
    assert decision.action == "fail" and decision.records == ()
    assert "predates gate(s) circular_accuracy, position_preference, order_interaction" in (
        decision.message
    )
    assert decision.message.endswith("pytest --snapshot-update X")
    # re-recorded, the snapshot's rules are the level's: the case is checked and passes
    merged = Payload("weather", "family", "m", "d", n, {}, merge_rules(old, "family"), {}, ev)
    ref.snapshot("family", "weather").write_text(merged.to_json(evidence_file=rel))
    decision = engine.decide_case(current, "test_family[weather]")
    assert decision.action == "pass"
    assert {r["figure"] for r in decision.records} == {r.figure for r in rules}
