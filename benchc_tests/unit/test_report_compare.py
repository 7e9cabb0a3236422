"""``benchc compare`` on any set of runs (issue 24): runs over different grids or sample sets
are compared on what they share, with what was left out said; a request the runs cannot serve
is told apart from a damaged store; every difference is candidate − baseline; Table VI ranks
equal displayed values equally."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchc.cli import main
from benchc.metrics.ranking import rank_mismatch
from benchc.report import CompareError
from benchc.report.compare import shared
from benchc.results.reader import read_run
from benchc.suite.reports import compare_runs
from benchc_tests.unit.report_runs import make_dataset, make_run


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cmp")


@pytest.fixture(scope="module")
def ds24(root) -> Path:
    return make_dataset(root / "ds24", n=24, seed=3)


@pytest.fixture(scope="module")
def five(root, ds24) -> Path:
    return make_run(root / "results", ds24, model="five", severities=(1, 2, 3, 4, 5))


@pytest.fixture(scope="module")
def two(root, ds24) -> Path:
    return make_run(root / "results", ds24, model="two", seed=1, damp=1.0, severities=(2, 4))


def test_runs_with_different_severities_compare_on_the_shared_cells(tmp_path, five, two, capsys):
    out = tmp_path / "cmp"
    assert main(["compare", str(five), str(two), "--out", str(out), "--no-images",
                 "--labels", "base,cand"]) == 0  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    # the paired summary line (issue 32): printed as report.json holds it
    (pair,) = doc["compare"]["paired"]["pairs"]
    assert f"  {pair['summary']}" in capsys.readouterr().out.splitlines()
    assert pair["summary"].startswith("cand − base on 24 paired samples: ")
    assert doc["axes"]["severities"] == [2, 4]
    assert doc["compare"]["severities"] == [2, 4] and doc["compare"]["n_samples"] == 24
    assert any(x.startswith("base: 6 of its 10 cells left out") for x in doc["compare"]["left_out"])
    # the figures are the shared sub-grid's: the base run's RAS over severities 2 and 4 only
    base = read_run(five)
    sub = shared([base, read_run(two)], ["base", "cand"]).runs[0]
    assert sub.severities == (2, 4)
    assert doc["series"][0]["table2"]["ras"]["value"] == pytest.approx(sub.grid.figure("ras"))
    assert sub.grid.figure("ras") != pytest.approx(base.grid.figure("ras"))
    html = (out / "report.html").read_text()
    assert 'id="left-out"' in html and "6 of its 10 cells left out" in html


def test_shared_samples_and_what_was_left_out(root, ds24):
    ds18 = make_dataset(root / "ds18", n=18, seed=3)
    a = read_run(make_run(root / "results", ds24, model="a"))
    b = read_run(make_run(root / "results", ds18, model="b", seed=2))
    assert set(b.ids) < set(a.ids)
    common = shared([a, b], ["a", "b"])
    assert common.n_samples == 18 and common.runs[0].ids == b.ids
    assert common.left_out == ["a: 6 of its 24 samples left out (not in every run)"]
    rows = [a.ids.index(i) for i in b.ids]
    np.testing.assert_array_equal(common.runs[0].logits, a.logits[rows])


def test_runs_sharing_no_cell_are_a_bad_request_not_a_damaged_store(tmp_path, root, ds24, capsys):
    fog = make_run(root / "results", ds24, model="fog", corruptions=("fog",))
    noise = make_run(root / "results", ds24, model="noise", corruptions=("gaussian_noise",))
    with pytest.raises(CompareError, match="share no corruption x severity cell"):
        compare_runs([fog, noise], tmp_path / "x", images=False)
    assert main(["compare", str(fog), str(noise), "--out", str(tmp_path / "y")]) == 4  # usage
    err = capsys.readouterr().err
    assert "share no corruption x severity cell" in err and "fog / ds24: 1 corruptions (fog)" in err
    assert "cannot read" not in err and "recompute" not in err


def test_a_damaged_store_is_still_reported_as_one(tmp_path, root, ds24, five, capsys):
    bad = make_run(root / "damaged", ds24, model="bad")
    (bad / "fog-1.npz").write_bytes(b"not an npz")
    assert main(["compare", str(five), str(bad), "--out", str(tmp_path / "z")]) == 8  # unreadable
    err = capsys.readouterr().err
    assert "cannot read this results folder" in err and "fog-1.npz" in err


def test_one_sign_convention_candidate_minus_baseline(tmp_path, five, two):
    page = compare_runs([five, two], tmp_path / "c", labels=["base", "cand"], images=False,
                        n_boot=20, n_permutations=999)  # fmt: skip
    doc = json.loads((tmp_path / "c" / "report.json").read_text())
    assert doc["compare"]["sign"] == "candidate − baseline"
    html = page.read_text()
    row = re.search(r'<tr class="diff"><td class="l">cand − base</td>(.*?)</tr>', html)
    assert row is not None, "Table II's difference row is candidate − baseline"
    t2 = {s["label"]: s["table2"] for s in doc["series"]}
    want = t2["cand"]["ras"]["value"] - t2["base"]["ras"]["value"]
    assert f"{want:+.3f}" in row.group(1)
    assert "base − cand" not in html


def test_table_vi_ties_share_a_rank():
    # equal as shown (3 decimals): one rank, no shift, so no colour
    scores = {
        "ras": np.array([-0.1204, -0.1201, -0.3]),
        "accuracy": np.array([0.5000004, 0.5, 0.4]),
    }
    t = rank_mismatch(["a", "b", "c"], scores, decimals=3)
    ranks = dict(zip(t.models, t.ranks.tolist(), strict=True))
    assert ranks["a"] == ranks["b"] == [1, 1] and ranks["c"] == [3, 3]
    assert not t.shift.any()
    untied = rank_mismatch(["a", "b", "c"], scores)
    assert untied.shift.any()  # the raw floats split the tie (what the page showed)
