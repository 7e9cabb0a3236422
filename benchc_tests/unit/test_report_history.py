"""``benchc history THRESHOLDS_DIR`` (issue 32 item 7): each gated figure across the recorded
baselines, release after release, with the drift of the newest against the oldest."""

from __future__ import annotations

import json

import pytest

from benchc.cli import EXIT_USAGE, main
from benchc.gates import Payload
from benchc.report.history import history, ordered
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline


@pytest.fixture(scope="module")
def thresholds(tmp_path_factory):
    root = tmp_path_factory.mktemp("hist")
    ds = make_dataset(root / "ds", n=24)
    # three releases, each hurt a little more by corruption: RAS drifts down release by release
    for name in ("release-2", "release-10", "release-9"):
        damp = {"release-2": 0.0, "release-9": 0.4, "release-10": 0.8}[name]
        run = make_run(root / "res", ds, model=name, seed=0, damp=damp)
        record_baseline(run, root / "thr", model=name)
    return root / "thr"


def test_releases_in_order_with_their_recorded_values_and_the_drift(thresholds):
    # not a git work tree: by name, numbers as numbers
    assert ordered(thresholds) == ["release-2", "release-9", "release-10"]
    doc = history(thresholds)
    (ras,) = [r for r in doc["rows"] if r["figure"] == "ras" and r["level"] == "model"]
    for name, v in zip(["release-2", "release-9", "release-10"], ras["values"], strict=True):
        rec = Payload.from_json((thresholds / name / "test_model-ras.json").read_text())
        assert v["value"] == pytest.approx(rec.figures["ras"].value)
    first, last = ras["values"][0]["value"], ras["values"][-1]["value"]
    d = ras["drift"]
    assert (d["from"], d["to"]) == ("release-2", "release-10")
    assert d["change"] == pytest.approx(last - first) and last < first
    assert d["floors_worse"] == pytest.approx((first - last) / ras["floor"])
    assert d["floors_worse"] > 1 and d["flag"]  # several floors lost, one release at a time
    # an explicit order is kept
    assert [b["name"] for b in history(thresholds, ["release-9", "release-2"])["baselines"]] == [
        "release-9", "release-2"]  # fmt: skip


def test_the_cli_prints_the_table_and_writes_json_and_html(thresholds, tmp_path, capsys):
    out = tmp_path / "h"
    assert main(["history", str(thresholds), "--json", str(out / "h.json"),
                 "--html", str(out / "h.html")]) == 0  # fmt: skip
    text = capsys.readouterr().out
    head = text.splitlines()[0]
    assert head.index("release-2") < head.index("release-9") < head.index("release-10")
    assert "model:ras" in text and "vsi:gap" in text and "DRIFT" in text
    doc = json.loads((out / "h.json").read_text())
    assert doc == history(thresholds)
    html = (out / "h.html").read_text()
    assert 'id="history"' in html and html.count("<tr") == 1 + len(doc["rows"])
    assert main(["history", str(thresholds), "--baselines", "release-3"]) == EXIT_USAGE
    assert "release-3 not in" in capsys.readouterr().err


def test_a_folder_that_does_not_exist_says_so_and_an_se_is_written_as_one(tmp_path, capsys):
    """Issue 40: "no recorded baseline in it" for a folder that does not exist, and
    "0.0000 ±6.9755" for a rate at 0 (an interval below a percentage's 0)."""
    from benchc.report.history import text_table

    assert main(["history", str(tmp_path / "nope")]) == EXIT_USAGE
    assert capsys.readouterr().err.strip().endswith("nope: does not exist")
    doc = {"baselines": [{"name": "r1", "dataset_fingerprint": "x"}], "rows": [
        {"level": "model", "figure": "mixed_cell_rate", "unit": "%", "drift": None,
         "values": [{"value": 0.0, "se": 6.9755}]}]}  # fmt: skip
    table = text_table(doc)
    assert "model:mixed_cell_rate (%)  0.0000 (SE 6.9755)" in table and "±" not in table
