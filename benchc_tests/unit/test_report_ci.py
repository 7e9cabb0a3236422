"""CI-native outputs end to end through pytest: a gate verdict recorded with
``benchc.report.ci.record`` reaches ``--junitxml`` as properties, and the session's verdicts
reach ``$GITHUB_STEP_SUMMARY`` as a Markdown table (no model is loaded)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

pytest_plugins = ["pytester"]

GATE_TEST = """
import benchc.plugin
from benchc.report import ci

VERDICT = {
    "case": "test_cell[fog-2]", "scope": "fog-2", "level": "cell", "figure": "ras",
    "label": "RAS", "direction": "higher", "baseline": -0.1, "current": -0.3, "change": -0.2,
    "tolerance": 0.05, "mdr": 0.04, "se_diff": 0.015, "floor": 0.02, "z": 3.2,
    "status": "fail", "reason": None, "movers": [["s1", 0.1, -0.4]],
}

def test_gate(request):
    request.config.stash[benchc.plugin.VERDICTS].append(VERDICT)
    ci.record(request.node, VERDICT)
"""


def test_junitxml_properties_and_step_summary(pytester, monkeypatch):
    pytester.makeconftest('pytest_plugins = ["benchc.plugin"]\n')
    pytester.makepyfile(test_gate=GATE_TEST)
    summary = pytester.path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = pytester.runpytest_inprocess("--junitxml=junit.xml", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    case = ET.parse(pytester.path / "junit.xml").getroot().find(".//testcase")
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props["benchc.ras.status"] == "fail"
    assert float(props["benchc.ras.change"]) == -0.2
    assert float(props["benchc.ras.tolerance"]) == 0.05
    assert float(props["benchc.ras.mdr"]) == 0.04
    text = summary.read_text()
    assert text.startswith("## benchc robustness gates: ❌ FAIL: 1 gate(s) failed")
    assert "| fail | RAS | fog-2 | -0.1000 | -0.3000 | -0.2000 | 0.0500 | 0.0400 |" in text
