"""The release gate's pure parts: printed commands carry every comparability setting, the
summary says each kind of note once with its count, rules can be switched off, a smoke run is
checked on the samples both sides hold, and provenance differences are named."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import numpy as np
import pytest

from benchc import provenance
from benchc.gates import GridEvidence, check
from benchc.gates.baselines import available, normalise, resolve, write_manifest
from benchc.gates.rules import merge_rules, parse_rule
from benchc.suite.config import SuiteConfig
from benchc.suite.messages import command
from benchc.suite.options import add_options, carried
from benchc.suite.payloads import build_payload
from benchc.suite.summary import gate_summary
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]


def _reparse(printed: str, rootdir: Path) -> SuiteConfig:
    """A printed command's options, parsed back as pytest would parse them."""
    argv = shlex.split(printed)
    parser = argparse.ArgumentParser()
    add_options(parser.add_argument)
    parser.add_argument("--snapshot-update", action="store_true")
    parser.add_argument("-k")
    known, rest = parser.parse_known_args(argv[1:])
    assert [r for r in rest if r.startswith("-") and r != "--pyargs"] == [], rest
    return SuiteConfig.from_options(vars(known).get, rootdir=rootdir)


def test_every_printed_command_carries_every_comparability_setting(tmp_path):
    for name in ("model", "data", "vsi"):
        (tmp_path / name).mkdir()
    cfg = SuiteConfig.from_options(
        {
            "benchc_model": str(tmp_path / "model"),
            "benchc_model_args": "attn_implementation=eager",
            "benchc_dataset": str(tmp_path / "data"),
            "benchc_dataset_args": "id=qid,options=A|B|C|D",
            "benchc_vsi_dataset": str(tmp_path / "vsi"),
            "benchc_corruptions": "fog,blur",
            "benchc_severities": "2-3",
            "benchc_image_size": "224",
            "benchc_seed": "7",
            "benchc_vsi_support": "full",
            "benchc_region_locator": "foreground",
            "benchc_results_dir": str(tmp_path / "res"),
            "benchc_cache_dir": str(tmp_path / "cache"),
            "benchc_thresholds_dir": str(tmp_path / "th"),
            "benchc_baseline": "release-1",
            "benchc_dtype": "bfloat16",
            "benchc_limit": "5",
        }.get,
        rootdir=tmp_path,
    )
    for printed in (command(cfg), command(cfg, update=True), command(cfg, extra=("-k", "fog-2"))):
        back = _reparse(printed, tmp_path)
        for key in carried():
            if key == "limit" and "--snapshot-update" in printed:
                assert back.limit is None  # a baseline is recorded on the whole dataset
                continue
            assert getattr(back, key) == getattr(cfg, key), (key, printed)
    # overrides replace exactly the setting they name
    assert "--image-size=448" in command(cfg, image_size=448)
    assert _reparse(command(cfg, baseline="other"), tmp_path).baseline == "other"


def test_a_gate_runs_printed_commands_gate_as_it_does_and_a_recording_as_a_recording(tmp_path):
    """A printed fix of a gate run (another setting, the next look) keeps how that run gates
    and exits: a release CI that copies it stays as strict. Recording commands carry none."""
    cfg = SuiteConfig.from_options(
        {
            "benchc_strict_gates": True,
            "benchc_inconclusive": "warn",
            "benchc_false_alarm_budget": "0.05",
            "benchc_looks": "3",
            "benchc_look": "2",
        }.get,
        rootdir=tmp_path,
    )
    back = _reparse(command(cfg, image_size=448), tmp_path)
    assert back.image_size == 448
    for key in ("strict_gates", "inconclusive", "false_alarm_budget", "looks", "look"):
        assert getattr(back, key) == getattr(cfg, key), key
    assert _reparse(command(cfg, look=3), tmp_path).look == 3
    recording = command(cfg, update=True)
    policy = ("--strict", "--inconclusive", "--false-alarm", "--look")
    assert not any(option in recording for option in policy)
    plain = SuiteConfig.from_options({}.get, rootdir=tmp_path)
    assert not any(option in command(plain) for option in policy)  # defaults: nothing said


def _record(status: str, figure: str, level: str, reason: str | None = None) -> dict:
    return {"case": f"{level}-{figure}", "scope": level, "level": level, "figure": figure,
            "status": status, "reason": reason, "baseline": 0.1, "current": 0.1,
            "tolerance": 0.01, "mdr": 0.5, "z": 3.0, "floor": 0.01, "n": 10}  # fmt: skip


def test_the_summary_says_each_kind_of_note_once_with_its_count():
    powerless = "this gate cannot fail on this dataset: minimal detectable regression 0.5"
    records = [_record("pass", "ras", "cell", powerless) for _ in range(95)]
    records += [_record("pass", "r_c", "family", powerless) for _ in range(5)]
    records += [_record("unchecked", "gap", "vsi", "no tower") for _ in range(3)]
    lines = gate_summary(records)
    power = [ln for ln in lines if ln.startswith("POWERLESS")]
    assert power == [
        "POWERLESS 100 gate(s) cannot fail on this dataset (r_c: 5 family; ras: 95 cell); "
        "each one's numbers: the report"
    ]
    assert [ln for ln in lines if "3 gates (gap: 3 vsi)" in ln] == [
        "    - 3 gates (gap: 3 vsi): no tower"  # under the summary's "unchecked gates:" heading
    ]


def test_the_powerless_count_is_one_number_in_the_verdict_and_the_summary():
    """Issue 40: "4 of 16 checked gate(s) cannot fail", then "POWERLESS 3 gate(s)". A gate
    flagged powerless without the words in its reason, and an unchecked gate whose reason says
    "cannot fail", are counted the same way in both lines."""
    import re

    from benchc.gates.verdict import decide

    says = "this gate cannot fail on this dataset: minimal detectable regression 0.5"
    records = [_record("pass", "ras", "model", says), _record("pass", "r_c", "model", says)]
    records += [_record("pass", "r_w", "model", says), dict(_record("pass", "acc", "model"),
                                                            powerless=True)]  # fmt: skip
    records += [_record("pass", f"f{i}", "model") for i in range(8)]
    records += [_record("unchecked", "gap", "vsi", says) for _ in range(2)]
    overall = decide(records)
    lines = gate_summary(records, overall=overall)
    (reason,) = [ln for ln in lines if "checked gate(s) cannot fail" in ln]
    (power,) = [ln for ln in lines if ln.startswith("POWERLESS")]
    assert re.search(r"\b4 of 12 checked gate\(s\)", reason), reason
    assert power.startswith("POWERLESS 4 gate(s)"), power


def _grid(n: int, seed: int = 0) -> GridEvidence:
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(n, 2, 4)).astype(np.float32)
    return GridEvidence(
        [f"s{i}" for i in range(n)], rng.integers(0, 4, n), np.full(n, 4), ["fog-1"], logits
    )


def _payload(ev: GridEvidence):
    return build_payload(
        ev, level="cell", scope="fog-1", model="m", dataset="d", info={}, seed=0,
        z_for=lambda level: 3.0,
    )  # fmt: skip


def test_a_rule_switched_off_is_reported_never_failed_and_survives_a_merge():
    rule = parse_rule("ras:higher:floor=0.02:off")
    assert rule.off and str(rule) == "ras:higher:floor=0.02:off"
    assert rule in merge_rules([rule], "cell")
    base = _payload(_grid(40))
    worse = _payload(_grid(40, seed=5))
    base = base.with_rules([parse_rule(str(r) + ":off") for r in base.rules])
    verdict = check(base, worse, z_for=lambda level: 3.0)
    assert {o.status for o in verdict.outcomes} == {"off"}
    assert all("switched off" in (o.reason or "") for o in verdict.outcomes)


def test_a_smoke_run_is_checked_on_the_samples_both_sides_hold():
    full = _grid(40)
    base = _payload(full)
    first = _payload(full.take(np.arange(12)))
    verdict = check(base, first, z_for=lambda level: 3.0)
    assert {o.status for o in verdict.outcomes} <= {"pass"}
    assert all(o.n == 12 for o in verdict.outcomes)
    assert "compared on the 12 samples both sides have (baseline 40)" in verdict.outcomes[0].reason


def test_baselines_are_named_or_given_by_path(tmp_path):
    th = tmp_path / "thresholds"
    (th / "release").mkdir(parents=True)
    (th / "release" / "test_model-ras.json").write_text('{"benchc_snapshot": 2}')
    (th / "a-checkpoint").mkdir()  # JSON that is not a snapshot: not a baseline
    (th / "a-checkpoint" / "config.json").write_text('{"model_type": "idefics3"}')
    assert available(th) == ["release"]
    assert normalise("release", th, tmp_path) == "release"
    assert normalise("other/rel", th, tmp_path) == str((tmp_path / "other" / "rel").resolve())
    ref = resolve(th, "release", None)
    assert ref.folder == th / "release" and ref.name == "release"
    assert resolve(th, None, "Org/Model-V2").folder == th / "org--model-v2"
    path = resolve(th, str(tmp_path / "elsewhere" / "v1"), None)
    assert path.name == "v1" and path.folder == tmp_path / "elsewhere" / "v1"
    write_manifest(th / "release", {"environment": {"torch": "1.0"}})
    assert available(th) == ["release"]  # the manifest is not a snapshot


def test_provenance_names_what_differs():
    now = provenance.environment()
    assert set(now) == set(provenance.FIELDS)
    assert provenance.differences(None, now) == []
    was = {**now, "torch": "0.1", "device": "cuda:0 (H100)"}
    assert provenance.differences(was, now) == [
        f"torch 0.1 -> {now['torch']}",
        f"device cuda:0 (H100) -> {now['device']}",
    ]
    assert set(provenance.numeric_versions()) == {"torch", "transformers"}


def test_k_selecting_nothing_loads_nothing(pytester: pytest.Pytester, tmp_path):
    """No suite case selected: no model and no dataset are opened (a model that cannot load is
    never touched), and no hidden placeholder is reported as deselected."""
    project = make_suite_project(pytester)
    args = ["suite", f"--model={tmp_path / 'no-such-model'}", f"--dataset={tmp_path / 'none'}"]
    result = project.runpytest_inprocess(*args, "-k", "no_such_case")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    assert "cannot be loaded" not in result.stderr.str()
    assert "117 deselected" in result.stdout.str()  # 95+5+15+2 cases, no placeholder
    # ... and none collected either (issue 40: "collected 15 items" while 14 ran)
    assert "collected 117 items / 117 deselected / 0 selected" in result.stdout.str()


def test_recording_block_says_one_undefined_figure_once_with_its_levels_and_folder():
    """A small dataset leaves R_c undefined in every cell, family and the model: one entry with
    its counts and one remedy naming the folder, not one entry per gate; a lone one keeps its
    own file."""
    from benchc.gates.recording import recording_block

    why = "r_c is undefined on the baseline (no sample counts towards it)"

    def rec(figure: str, level: str, name: str, **extra) -> dict:
        return {"status": "recorded", "figure": figure, "level": level, "scope": name,
                "file": f"/t/model-v1/test_{level}-{name}.json", **extra}  # fmt: skip

    records = [rec("r_c", "cell", f"fog-{s}", undefined=why, remedy="x") for s in range(1, 6)]
    records += [rec("r_c", "family", "weather", undefined=why, remedy="x")]
    records += [rec("gap", "vsi", "vsi", undefined="too few images", remedy="record larger")]
    records += [rec("accuracy", "cell", f"fog-{s}", powerless="mdr") for s in range(1, 3)]
    lines = recording_block(records, "model-v1 (thresholds/model-v1)")
    text = "\n".join(lines)
    assert "7 gate(s) undefined on the baseline" in text
    assert text.count("r_c in ") == 1
    assert f"    r_c in 5 cell, 1 family: {why}" in lines
    assert "switch the gate off in each of their 6 files in /t/model-v1 by adding ':off'" in text
    assert "    gap in vsi: too few images" in lines and "      remedy: record larger" in lines
    assert "    accuracy: 2 cell" in lines


def test_a_missing_baseline_lists_only_recorded_ones_and_each_printed_value_resolves(tmp_path):
    """Issue 40: the folders beside a missing ``--baseline`` path hold a report and a
    checkpoint (JSON, not snapshots) and one recorded baseline; ``--thresholds-dir`` holds
    another. Only the two baselines are listed, and each printed command's ``--baseline``
    resolves to one of them (the slow test runs them: test_missing_baseline_runs.py)."""
    from benchc.gates.baselines import MANIFEST, BaselineRef, is_recorded
    from benchc.suite.messages import missing_baseline

    place, th = tmp_path / "place", tmp_path / "th"
    for folder, name in ((place / "report", "report.json"), (place / "ckpt", "config.json")):
        folder.mkdir(parents=True)
        (folder / name).write_text("{}")
    for folder in (place / "release-0", th / "release-9"):
        folder.mkdir(parents=True)
        (folder / "test_model-ras.json").write_text('{"benchc_snapshot": 2}')
    write_manifest(place / "release-0", {})
    missing = place / "release-1"
    cfg = SuiteConfig.from_options(
        {"benchc_thresholds_dir": str(th), "benchc_baseline": str(missing)}.get, rootdir=tmp_path
    )
    text = missing_baseline(cfg, BaselineRef("release-1", missing, str(missing)), "cand")
    assert f"no threshold snapshot in {missing}/ (the folder does not exist; " in text
    assert f"baselines recorded in {th}: release-9; in {place}: release-0\n" in text
    printed = [line.strip() for line in text.splitlines() if line.startswith("       pytest")]
    assert len(printed) == 3
    for line in printed[:2]:
        back = _reparse(line, tmp_path)
        folder = resolve(back.thresholds_dir, back.baseline, None).folder
        assert is_recorded(folder) and (folder / "test_model-ras.json").is_file(), line
    back = _reparse(printed[2].replace("<released checkpoint>", "m"), tmp_path)
    assert back.baseline == str(missing) and not (missing / MANIFEST).exists()
