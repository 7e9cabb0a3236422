"""The one gate pipeline: comparability, the gate count and the re-record command are the
same for the live suite and for ``benchc report`` on a stored run."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from benchc import spec
from benchc.gates import ErrorBudget, GateRule, GridEvidence, figures, sidecar
from benchc.gates.budget import count_gates
from benchc.gates.pipeline import check_case, settings_mismatch
from benchc.gates.samples import sample_verdicts
from benchc.results.reader import StoredRun
from benchc.suite.config import SuiteConfig
from benchc.suite.gate import record_command as cfg_command
from benchc.suite.gate import run_record_command
from benchc.suite.options import suite_command
from benchc.suite.payloads import build_payload, grid_payloads

Z3 = lambda level: 3.0  # noqa: E731
INFO = {"dataset_fingerprint": "abc", "image_size": None, "seed": 0}


def _grid(n=30):
    rng = np.random.default_rng(0)
    answers = rng.integers(0, 4, size=n)
    clean = rng.normal(size=(n, 4)) + 2.0 * np.eye(4)[answers]
    by = {c: clean + rng.normal(size=(n, 4)) for c in ("fog-1", "fog-2", "snow-1", "snow-2")}
    return GridEvidence.from_conditions(
        [f"s{i}" for i in range(n)], answers, np.full(n, 4), clean, by
    )


def _payload(info=INFO):
    return build_payload(_grid(), level="cell", scope="cell", model="m", dataset="d",
                         info=info, seed=0, z_for=Z3)  # fmt: skip


def test_one_comparability_rule_and_rule_check():
    base = _payload()
    ok = check_case(base, _payload(), z_for=Z3, seed=0, where="x")
    assert ok.problem is None and {o.status for o in ok.verdict.outcomes} == {"pass"}
    other = _payload({**INFO, "image_size": 224, "extra": "ignored"})
    bad = check_case(base, other, z_for=Z3, seed=0, where="x")
    assert bad.verdict is None and bad.mismatch == (("image_size", None, 224),)
    assert bad.problem == "snapshot recorded under other settings (image_size)"
    assert settings_mismatch(base, replace(other, info={**INFO, "extra": 1})) == []
    broken = replace(base, rules=(GateRule("no_such_figure", "higher", 0.1),))
    assert "no_such_figure" in str(check_case(broken, base, z_for=Z3, seed=0, where="x").problem)


def test_another_sklearn_release_is_said_in_every_verdict_not_refused():
    base = _payload({**INFO, "sklearn": "1.8.0"})
    same = check_case(base, _payload({**INFO, "sklearn": "1.8.0"}), z_for=Z3, seed=0, where="x")
    assert all(o.reason is None for o in same.verdict.outcomes)
    other = check_case(base, _payload({**INFO, "sklearn": "1.9.1"}), z_for=Z3, seed=0, where="x")
    assert other.problem is None
    assert {o.status for o in other.verdict.outcomes} == {"pass"}
    assert all(
        "sklearn 1.9.1 here, 1.8.0 when recorded" in o.reason for o in other.verdict.outcomes
    )


def test_one_gate_count_for_selected_cases_and_rebuilt_payloads():
    payloads = grid_payloads(_grid(), model="m", dataset="d", info=INFO, seed=0, z_for=Z3)
    cases = [("cell", None)] * 4 + [("family", None)]  # fog and snow: one family, weather
    cases += [("model", (f.name,)) for f in figures("model", gated_only=True)]
    assert count_gates(cases) == ErrorBudget.for_payloads(0.01, payloads.values()).gates
    assert count_gates([("cell", None), ("model", ("ras",))]) == {
        "cell": len(figures("cell", gated_only=True)),
        "model": 1,
    }


def test_one_record_command_for_a_config_and_a_stored_run(tmp_path):
    cfg = SuiteConfig(
        model="org/m", corruptions=("fog",), severities=(1, 5), seed=3,
        results_dir=tmp_path / "results",
    )  # fmt: skip
    run = StoredRun(
        path=tmp_path / "results" / "m" / "testbed-abc",
        manifest={"model_spec": "org/m", "settings": {"seed": 3, "image_size": None}},
        ids=(), answers=np.array([]), n_options=np.array([]), corruptions=("fog",),
        severities=(1, 5), clean_logits=None, logits=None,
    )  # fmt: skip
    assert run_record_command(run, cfg.thresholds_dir) == cfg_command(cfg)
    recorded = suite_command({"seed": spec.DEFAULT_SEED}, update=True)
    assert recorded == "pytest benchc_tests/suite --snapshot-update"
    # a non-default VSI support is carried, live and from snapshots recorded under it
    full = replace(cfg, vsi_support="full")
    assert "--vsi-support=full" in cfg_command(full)
    folder = tmp_path / "thresholds" / run.model_name
    folder.mkdir(parents=True)
    (folder / "test_vsi-gap.json").write_text(
        '{"info": {"vsi_variant": "vsi (full distribution)"}}'
    )
    assert run_record_command(run, tmp_path / "thresholds") == cfg_command(
        replace(full, thresholds_dir=tmp_path / "thresholds")
    )


def test_sweep_unreferenced_keeps_what_a_snapshot_names(tmp_path: Path):
    folder = tmp_path / "m"
    kept = sidecar.save(folder, _grid())
    other = sidecar.save(folder, _grid(20))
    snap = f'{{"benchc_snapshot": 1, "evidence": {{"file": "{kept}"}}}}'
    (folder / "test_cell-fog-1.json").write_text(snap)
    (folder / "notes.json").write_text("[1, 2]")  # another tool's JSON names nothing
    sibling = tmp_path / "other"  # a sibling folder of the same shape is never swept
    (sibling / "arrays").mkdir(parents=True)
    (sibling / "arrays" / "keep.npz").write_bytes(b"x")
    (sibling / "a.json").write_text("{}")
    assert sidecar.sweep_unreferenced(folder) == [folder / other]
    assert (folder / kept).is_file() and not (folder / other).exists()
    assert (sibling / "arrays" / "keep.npz").read_bytes() == b"x"


def _cell(n=40, seed=1):
    """One cell: confident samples, plus sample s0 on a near-tie of its two best options."""
    rng = np.random.default_rng(seed)
    answers = rng.integers(0, 4, size=n)
    clean = rng.normal(size=(n, 4)) * 0.3 + 4.0 * np.eye(4)[answers]
    corrupt = clean + rng.normal(size=(n, 4)) * 0.3
    clean[0] = corrupt[0] = [1.0, 0.99, -2.0, -2.0]
    answers[0] = 0
    return GridEvidence.from_conditions(
        [f"s{i}" for i in range(n)], answers, np.full(n, 4), clean, {"fog-1": corrupt}
    )


def test_per_sample_verdicts_take_each_samples_own_benign_tolerance():
    base = _cell()
    z = ErrorBudget(0.01, {"sample": 1000}).z("sample")
    for draw in range(3):  # benign change fails no sample
        got = sample_verdicts(base, base.benign(500 + draw), z=z)
        assert not [v for v in got.values() if v.status == "fail"]
    noisy = got["s0"]
    assert noisy.status == "unchecked" and "too noisy to judge" in noisy.reason
    logits = base.logits.copy()  # a regression: s1's corrupted answer turns confidently wrong
    logits[1, 1] = np.roll(logits[1, 1], 1)
    worse = GridEvidence(base.ids, base.answers, base.n_options, base.conditions, logits)
    verdicts = sample_verdicts(base, worse, z=z)
    assert [v.sample for v in verdicts.values() if v.status == "fail"] == ["s1"]
    v = verdicts["s1"]
    assert v.current < v.baseline - v.tolerance and v.tolerance >= 0.1
    assert "benign null SD" in v.describe(figures("sample")[0])
