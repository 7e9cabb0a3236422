"""GateCheck without a pytest run: unchecked gates are reported, and fail under --strict-gates;
the terminal summary says what failed, what was kept, and each model-level gate's MDR."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

from benchc.gates import ErrorBudget, GridEvidence, Payload, default_rules, sidecar
from benchc.gates.baselines import BaselineRef
from benchc.gates.engine import GateEngine
from benchc.gates.states import Policy
from benchc.suite.config import SuiteConfig
from benchc.suite.gate import GateCheck
from benchc.suite.summary import gate_summary


class _Snapshot:
    """The two things GateCheck reads from syrupy's fixture: the location, and ``==``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.extension = self
        self.test_location = None

    def get_location(self, **_):
        return str(self.path)


class _Node:
    name = "test_model[r_w]"
    user_properties: ClassVar[list] = []


def _evidence(all_right: bool) -> GridEvidence:
    rng = np.random.default_rng(0)
    n = 30
    answers = rng.integers(0, 4, n)
    clean = rng.normal(size=(n, 4)).astype(np.float32)
    if all_right:
        clean[np.arange(n), answers] += 20
    fog = clean + rng.normal(size=(n, 4)).astype(np.float32)
    return GridEvidence.from_conditions(
        [f"s{i}" for i in range(n)], answers, np.full(n, 4), clean, {"fog-1": fog}
    )


def _payload(ev: GridEvidence) -> Payload:
    return Payload("model", "model", "m", "d", 30, {}, default_rules("model")[2:3], {}, ev)


@pytest.mark.parametrize("strict", [False, True])
def test_an_unchecked_gate_is_reported_and_fails_under_strict(tmp_path, strict):
    base = _payload(_evidence(all_right=True))  # no clean-wrong sample: R_w undefined
    path = tmp_path / "m" / "test_model-r_w.json"
    rel = sidecar.save(path.parent, base.evidence)
    path.write_text(base.to_json(evidence_file=rel))
    records = []
    engine = GateEngine(BaselineRef("m", path.parent), budget=ErrorBudget(), policy=Policy(strict))
    gate = GateCheck(
        _Snapshot(path), SuiteConfig(), _Node(), update=False, engine=engine,
        sink=lambda case, rec: records.append(rec),
    )  # fmt: skip
    exc = pytest.fail.Exception if strict else pytest.skip.Exception
    with pytest.raises(exc, match="could not be checked"):
        gate(_payload(_evidence(all_right=True)))
    (rec,) = records
    assert rec["status"] == "unchecked" and "undefined on the baseline" in rec["reason"]
    text = "\n".join(gate_summary(records))
    assert "  unchecked gates:\n    - r_w in model: r_w is undefined on the baseline" in text


def test_summary_lists_failures_kept_improved_and_mdr():
    recs = [
        {"case": "test_model[ras]", "scope": "model", "level": "model", "figure": "ras",
         "status": "fail", "baseline": 0.1, "current": 0.0, "tolerance": 0.02, "mdr": 0.02,
         "z": 3.2, "floor": 0.01, "n": 100, "reason": None},
        {"case": "test_model[r_c]", "scope": "model", "level": "model", "status": "kept",
         "reason": "recorded over 95 cells, this run selects 5"},
        {"case": "test_cell[fog-1]", "scope": "fog-1", "level": "cell", "figure": "accuracy",
         "status": "improved", "baseline": 0.5, "current": 0.7, "tolerance": 0.1, "mdr": 0.05,
         "z": 4.4, "floor": 0.03, "n": 100, "reason": None},
    ]  # fmt: skip
    text = "\n".join(gate_summary(recs, "budget line"))
    assert "gates: 1 fail, 1 improved, 1 kept" in text
    assert "  failed gates:\n    - ras in model: 0.1 -> 0 (tolerance 0.02, MDR 0.02)" in text
    assert "KEPT test_model[r_c]" in text and "accuracy in fog-1: 0.5 -> 0.7" in text
    assert "ras" in text.split("minimal detectable regression")[1]
    assert gate_summary([]) == []


def test_summary_says_why_a_tolerance_exceeds_the_mdr():
    note = "tolerance 0.2457 exceeds the MDR 0.03: this change moved samples both ways"
    rec = {"case": "test_vsi[insensitive_fraction]", "scope": "vsi", "level": "vsi",
           "figure": "insensitive_fraction", "status": "pass", "baseline": 0.111,
           "current": 0.222, "tolerance": 0.2457, "mdr": 0.03, "z": 3.29, "floor": 0.03,
           "n": 18, "reason": None, "note": note}  # fmt: skip
    assert note in "\n".join(gate_summary([rec]))
    failed = "\n".join(gate_summary([{**rec, "status": "fail"}])).split("failed gates:")[1]
    assert note in failed
