"""The run's one verdict (issue 32 item 1): fail, pass or inconclusive with its reasons, one
definition (:mod:`benchc.gates.verdict`) rendered the same in the terminal summary,
report.json, the page's banner, the JUnit suite properties and the step summary."""

from __future__ import annotations

import json
from html import escape as html_escape
from pathlib import Path

import numpy as np
import pytest

from benchc.gates.engine import run_verdict
from benchc.gates.facts import Facts, blind_share, run_facts
from benchc.gates.verdict import Overall, decide
from benchc.report import ci
from benchc.report.write import run_facts_for
from benchc.results.reader import StoredRun
from benchc.suite.reports import write_report
from benchc.suite.summary import gate_summary
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline, verdict


def _powerless(scope: str, figure: str, level: str) -> dict:
    why = "this gate cannot fail on this dataset: minimal detectable regression 0.3 >= room 0.2"
    return verdict(scope, figure, "pass", level=level, reason=why, powerless=True)


def test_a_failed_gate_fails_and_one_cause_is_one_entry():
    undefined = [
        verdict(f"fog-{s}", "r_c", "fail", reason=f"r_c became undefined (baseline {0.1 * s:.4g})")
        for s in range(1, 23)
    ]
    real = verdict("model", "ras", "fail", level="model")
    out = decide([*undefined, real, verdict("model", "accuracy", "pass")])
    assert out.state == "fail" and out.headline.startswith("FAIL: 23 gate(s) failed")
    failed = [r for r in out.reasons if r.kind == "failed"]
    assert len(failed) == 2  # 22 gates, one cause: one entry; the RAS gate its own
    assert failed[0].gates == 22 and "r_c became undefined in 22 gate(s)" in failed[0].text
    assert failed[1].anchor == "gate-model-ras"
    # the terminal says the same: one FAIL line for the one cause
    lines = gate_summary([*undefined, real])
    at = lines.index("  failed gates:")
    assert lines[at + 1 : at + 3] == [f"    - {r.text}" for r in failed]


def test_pass_needs_gates_that_can_fail():
    ok = [verdict("model", f, "pass") for f in ("ras", "accuracy")]
    assert decide(ok).state == "pass"
    # a model-level gate that cannot fail: inconclusive, with the reason
    out = decide([*ok, _powerless("model", "r_w", "model")])
    assert out.state == "inconclusive"
    assert out.reasons[0].kind == "powerless" and "r_w: 1 model" in out.reasons[0].text
    # one cell gate of many that cannot fail is said in the table, not a verdict of its own
    cells = [verdict(f"fog-{s}", "ras", "pass") for s in range(1, 6)]
    assert decide([*ok, *cells, _powerless("fog-1", "r_w", "cell")]).state == "pass"
    # most gates powerless: inconclusive
    many = [_powerless(f"fog-{s}", "r_w", "cell") for s in range(1, 9)]
    assert decide([*ok, *many]).state == "inconclusive"
    # nothing could be checked: inconclusive, never a pass
    none = decide([verdict("model", "ras", "unchecked", reason="no evidence")])
    assert none.state == "inconclusive" and "unchecked" in {r.kind for r in none.reasons}


def test_a_model_not_answering_with_a_letter_is_inconclusive():
    ok = [verdict("model", "ras", "pass")]
    out = decide(ok, Facts(n=18, low_mass=18))
    assert out.state == "inconclusive"
    assert out.reasons[0].kind == "not_answering" and "18 of 18 samples" in out.reasons[0].text
    assert decide(ok, Facts(n=18, low_mass=9)).state == "pass"  # "most": more than half


def _run(clean: np.ndarray, cube: np.ndarray, answers: np.ndarray, mass=None) -> StoredRun:
    n, d, n_sev, _ = cube.shape
    return StoredRun(
        path=Path("mem"),
        manifest={"settings": {"seed": 0}},
        ids=tuple(f"s{i}" for i in range(n)),
        answers=answers,
        n_options=np.full(n, clean.shape[1]),
        corruptions=("fog", "gaussian_noise")[:d],
        severities=tuple(range(1, n_sev + 1)),
        clean_logits=clean.astype(np.float32),
        logits=cube.astype(np.float32),
        option_mass=mass,
    )


def _pair(n: int = 18, base_right: int = 14, cand_right: int = 6):
    """A baseline right on ``base_right`` of ``n`` clean samples and a candidate right on
    ``cand_right`` (clean accuracy 0.778 -> 0.333 on 18), both hurt a little by corruption."""
    rng = np.random.default_rng(0)
    answers = np.zeros(n, dtype=np.int64)

    def side(right: int, blind: bool = False) -> StoredRun:
        clean = rng.normal(0, 0.1, (n, 4))
        clean[:right, 0] += 3.0
        clean[right:, 1] += 3.0
        noise = 0.0 if blind else rng.normal(0, 0.8, (n, 2, 3, 4))
        cube = clean[:, None, None, :] + noise
        return _run(clean, cube, answers, np.ones(n))

    return side, answers


def test_a_large_change_no_gate_covers_is_inconclusive():
    side, _ = _pair()
    base, cand = side(14), side(6)
    facts = run_facts(cand, base)
    acc = {d.figure.name: d for d in facts.changes}["acc_clean"]
    assert (acc.baseline, acc.current) == (pytest.approx(14 / 18), pytest.approx(6 / 18))
    assert acc.significant and acc.se > 0
    # the model gates passed (or could not fail): clean accuracy is gated by none of them
    records = [verdict("model", "ras", "pass"), _powerless("model", "accuracy", "model")]
    out = decide(records, facts)
    assert out.state == "inconclusive"
    texts = [r.text for r in out.reasons if r.kind == "ungated_change"]
    assert any(t.startswith("clean accuracy moved 0.778 -> 0.333") and "no gate covers it" in t
               for t in texts)  # fmt: skip
    # the same runs with no change: no such reason
    same = run_facts(base, base)
    assert not [r for r in decide(records[:1], same).reasons if r.kind == "ungated_change"]


def test_a_model_that_no_longer_looks_at_the_image_is_inconclusive():
    side, _ = _pair(base_right=14, cand_right=14)
    base, blind = side(14), side(14, blind=True)
    assert blind_share(blind) == 1.0 and blind_share(base) < 0.5
    records = [verdict("model", "ras", "improved", level="model")]
    out = decide(records, run_facts(blind, base))
    assert out.state == "inconclusive"
    (why,) = [r for r in out.reasons if r.kind == "image_blind"]
    assert "no longer looks at the image" in why.text and "1 'improved'" in why.text
    assert decide(records, run_facts(base, base)).state == "pass"


def test_one_verdict_rendered_the_same_everywhere(tmp_path):
    ds = make_dataset(tmp_path / "ds", n=24)
    base = make_run(tmp_path / "b", ds, model="toy-vlm")
    record_baseline(base, tmp_path / "thr")
    cand = make_run(tmp_path / "c", ds, model="toy-vlm", seed=5, damp=1.5)
    records = [verdict("model", "ras", "pass"), _powerless("model", "r_w", "model")]
    overall = decide(records, Facts(n=24, low_mass=20))
    assert overall.state == "inconclusive" and len(overall.reasons) == 2
    out = tmp_path / "rep"
    write_report(cand, out, thresholds_dir=tmp_path / "thr", verdicts=records, overall=overall,
                 images=False, n_boot=20)  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    assert doc["overall"] == json.loads(json.dumps(overall.to_dict()))
    assert Overall.from_dict(doc["overall"]).lines() == overall.lines()
    html = (out / "report.html").read_text()
    assert 'data-state="inconclusive"' in html and "v-inconclusive" in html
    # every gate passed: folded away, no empty table header under the verdict
    assert 'id="verdict-table"' not in html and 'id="pass-gates"' in html
    for r in overall.reasons:
        assert html_escape(r.text, quote=False) in html
    summary = gate_summary(records, overall=overall)
    assert summary[: len(overall.lines())] == overall.lines()
    md = ci.step_summary(records, overall=overall)
    assert md.splitlines()[0] == f"## benchc robustness gates: ⚠️ {overall.headline}"
    assert all(f"- {r.text}" in md for r in overall.reasons)
    props = dict(ci.suite_properties(overall))
    assert props["benchc.verdict"] == "inconclusive"
    assert [props[f"benchc.verdict.reason.{i}"] for i in (1, 2)] == [
        r.text for r in overall.reasons
    ]
    # decided from the stored runs (what the suite and benchc report do): the same state
    assert run_verdict(records, facts=run_facts_for(cand, tmp_path / "thr" / "toy-vlm")).state == (
        "inconclusive"
    )


def test_benchc_report_prints_the_verdict_and_inconclusive_can_fail(tmp_path, capsys):
    from benchc.cli import EXIT_INCONCLUSIVE, main

    ds = make_dataset(tmp_path / "ds", n=24)
    base = make_run(tmp_path / "b", ds, model="toy-vlm")
    record_baseline(base, tmp_path / "thr")  # RAS and VSI only: the other model gates unchecked
    args = ["report", str(base), "--baseline", str(tmp_path / "thr"), "--no-images"]
    # without --inconclusive=fail the exit status is the gates' (0: none failed), see the
    # suite's own test in test_release_gate.py; here the failing mode
    assert main([*args, "--out", str(tmp_path / "a"), "--inconclusive=fail"]) == EXIT_INCONCLUSIVE
    out = capsys.readouterr().out
    doc = json.loads((tmp_path / "a" / "report.json").read_text())
    assert doc["overall"]["state"] == "inconclusive"
    assert doc["overall"]["headline"] in out and "model-level gate(s) could not be checked" in out


def test_an_unresolved_run_is_named_the_same_everywhere(tmp_path):
    """UNRESOLVED (docs/spec.md §6): the figure, its change, its z and the samples that would
    resolve it, in the banner, the terminal, report.json, JUnit, the step summary and the
    exporters' bundle; never PASS."""
    from benchc.export.bundle import build

    ds = make_dataset(tmp_path / "ds", n=24)
    base = make_run(tmp_path / "b", ds, model="toy-vlm")
    record_baseline(base, tmp_path / "thr")
    cand = make_run(tmp_path / "c", ds, model="toy-vlm", seed=5, damp=1.5)
    unresolved = verdict(
        "model", "accuracy", "unresolved", baseline=0.62, current=0.56, change=-0.06,
        mdr=0.014, tolerance=0.082, z_change=-2.1, resolve_n=176, n=115,
    )  # fmt: skip
    records = [verdict("model", "ras", "pass"), unresolved]
    overall = decide(records)
    assert overall.state == "unresolved"
    (reason,) = overall.reasons
    for part in ("accuracy in model", "0.62 -> 0.56", "change -0.06", "z -2.10",
                 "about 176 samples would resolve it"):  # fmt: skip
        assert part in reason.text, reason.text
    out = tmp_path / "rep"
    write_report(cand, out, thresholds_dir=tmp_path / "thr", verdicts=records, overall=overall,
                 images=False, n_boot=20)  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    assert doc["overall"]["state"] == "unresolved"
    assert doc["overall"]["reasons"][0]["text"] == reason.text
    html = (out / "report.html").read_text()
    assert 'data-state="unresolved"' in html and "v-unresolved" in html
    from html import unescape

    assert reason.text in unescape(html)
    assert "about 176 samples would resolve it (n=115 now)" in html  # the gate's own row
    assert gate_summary(records, overall=overall)[: len(overall.lines())] == overall.lines()
    assert dict(ci.suite_properties(overall))["benchc.verdict.reason.1"] == reason.text
    assert ci.step_summary(records, overall=overall).startswith(
        f"## benchc robustness gates: ⚠️ {overall.headline}"
    )
    exported = build(out)
    assert exported.verdict == "unresolved"
