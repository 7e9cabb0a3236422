"""Drill-down cards as a release manager reads them: a gate's movers link to their cards, a
card shows the baseline's (or the compared run's) answer beside this run's, and its title says
what happened to the sample (a tie is not a drop; an id that is a number still reads as a
sample; two values that differ never print equal)."""

from __future__ import annotations

import json
import re

import pytest

from benchc.report import drill
from benchc.report.fmt import moved
from benchc.results.reader import read_run
from benchc.suite.reports import compare_runs, write_report
from benchc_tests.unit.report_runs import make_dataset, make_run, verdict

N_BOOT = 20


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return make_dataset(tmp_path_factory.mktemp("data") / "toy", n=12)


def test_moved_never_prints_two_different_values_equal():
    assert moved(0.1, -0.4) == "0.10 → -0.40"
    assert moved(0.5012, 0.5049) == "0.501 → 0.505"
    assert moved(0.500001, 0.500002) == "0.500001 → 0.500002"
    assert moved(0.25, 0.25) == "0.25 (unchanged)"
    assert moved(None, 0.25) == "n/a → 0.25"


def test_sample_anchor_is_a_valid_fragment_for_any_id():
    assert drill.sample_anchor("syn3-00004") == "sample-syn3-00004"
    assert drill.sample_anchor("12") == "sample-12"
    a, b = drill.sample_anchor("a b"), drill.sample_anchor("a/b")
    assert a != b and re.fullmatch(r"sample-a-b-[0-9a-f]{8}", a) and " " not in a


def test_movers_link_their_cards_and_cards_show_both_answers(tmp_path, dataset):
    """Against a recorded baseline: each failing gate's mover is a link to a card on the
    page; the card shows the baseline's and the candidate's answer in the card's cell (their
    option probabilities are each run's own)."""
    from benchc.report import baseline as snap
    from benchc_tests.unit.report_runs import record_baseline

    base = make_run(tmp_path / "results", dataset)
    cur = make_run(tmp_path / "results", dataset, damp=0.8, fingerprint="cur")
    record_baseline(base, tmp_path / "thresholds")
    sid = read_run(cur).ids[3]
    vs = [verdict("fog-2", "ras", "fail", movers=[[sid, 0.5012, 0.5049]])]
    page = write_report(
        cur, tmp_path / "out", thresholds_dir=tmp_path / "thresholds", verdicts=vs, n_boot=N_BOOT
    )
    html = page.read_text()
    doc = json.loads((page.parent / "report.json").read_text())
    card = next(it for it in doc["drilldown"] if it["id"] == sid)
    assert f'<a class="mover" href="#{card["anchor"]}">{sid}</a>: 0.501 → 0.505' in html
    assert f'<div class="card" id="{card["anchor"]}"' in html
    assert card["why"].endswith("(fail): 0.501 → 0.505")
    assert html.count('<h3 class="card-title">sample <b>') == len(doc["drilldown"])

    # the baseline's answer (from its snapshot evidence) beside the candidate's, in fog-2
    evidence = snap.evidence_run(snap.read_folder(tmp_path / "thresholds" / "toy-vlm"))
    want = {
        "baseline": drill.answers_in(evidence, sid, "fog-2", "baseline"),
        "candidate": drill.answers_in(read_run(cur), sid, "fog-2", "candidate"),
    }
    assert [a["label"] for a in card["answers"]] == ["baseline", "candidate"]
    for a in card["answers"]:
        assert a == want[a["label"]]
    assert card["answers"][1]["p_corrupted"] == card["p_corrupted"]
    assert card["answers"][0]["p_corrupted"] != card["answers"][1]["p_corrupted"]
    block = html[html.index(f'id="{card["anchor"]}"') :]
    block = block[: block.index("</div></div>") if "</div></div>" in block else None]
    for a in card["answers"]:
        right = "right" if a["correct_corrupted"] else "wrong"
        letter = chr(65 + a["pred_corrupted"])
        assert f"<b>{a['label']}</b>: clean " in block and f"fog-2 {letter} ({right})" in block


def test_a_tie_is_not_called_a_drop_and_numeric_ids_read_as_samples(tmp_path):
    """Two identical runs compared: no sample's mean RAS moved, so no card says "drop"; the
    dataset's ids are numbers and each card's title still names a sample."""
    from dataclasses import replace

    from benchc.data import load_dataset, save_jsonl

    src = load_dataset(make_dataset(tmp_path / "ds0", n=12))
    save_jsonl([replace(s, id=str(100 + i)) for i, s in enumerate(src)], tmp_path / "ds")
    a = make_run(tmp_path / "a", tmp_path / "ds")
    b = make_run(tmp_path / "b", tmp_path / "ds")
    page = compare_runs([a, b], tmp_path / "out", labels=["old", "new"], n_boot=N_BOOT,
                        n_permutations=99)  # fmt: skip
    doc = json.loads((page.parent / "report.json").read_text())
    cards = doc["drilldown"]
    assert cards and all(it["id"].isdigit() for it in cards)
    for it in cards:
        assert "drop" not in it["why"] and it["why"].startswith("mean RAS unchanged vs old (")
        assert [a["label"] for a in it["answers"]] == ["old", "new"]  # the baseline first
        assert it["answers"][0]["p_clean"] == it["answers"][1]["p_clean"]
    html = page.read_text()
    for it in cards:
        assert f'<div class="card" id="sample-{it["id"]}"' in html
        assert f'<h3 class="card-title">sample <b>{it["id"]}</b></h3>' in html
