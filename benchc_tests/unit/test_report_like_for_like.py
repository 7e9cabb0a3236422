"""Like for like (issue 32 item 2, issue 31 item 4): a subset run gated against a larger
baseline is reported on the cells and samples the gates compared, never crashes the report,
and ``benchc report`` does not blame the store for it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchc.cli import main
from benchc.report.compare import restrict
from benchc.results.reader import read_run
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline

FULL = ("gaussian_noise", "defocus_blur", "fog")
SUBSET = ("gaussian_noise", "fog")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("l4l")
    ds = make_dataset(root / "ds", n=24)
    base = make_run(
        root / "base", ds, model="toy-vlm", corruptions=FULL, severities=(1, 2, 3, 4, 5)
    )
    folder = record_baseline(base, root / "thr")
    # the same model on a subset: the same numbers on every cell both have
    cand = make_run(root / "cand", ds, model="toy-vlm", corruptions=SUBSET, severities=(1, 3, 5))
    return {"root": root, "base": base, "cand": cand, "thr": root / "thr", "folder": folder}


def test_a_subset_run_against_a_full_baseline_is_drawn_on_the_shared_cells(setup, tmp_path, capsys):
    # ``benchc report <subset run> --baseline thresholds``: it builds (issue 31 item 4: it crashed
    # in the severity plot and blamed the store) and draws like for like
    out = tmp_path / "rep"
    rc = main(["report", str(setup["cand"]), "--baseline", str(setup["thr"]), "--out", str(out),
               "--no-images"])  # fmt: skip
    assert "cannot read this results folder" not in capsys.readouterr().err
    assert rc == 0 and (out / "report.html").is_file()
    doc = json.loads((out / "report.json").read_text())
    sub = doc["subset"]
    assert sub["severities"] == [1, 3, 5] and sorted(sub["corruptions"]) == sorted(SUBSET)
    assert sub["n_samples"] == 24 and sub["like_for_like"] is True
    assert sub["baseline"]["severities"] == [1, 2, 3, 4, 5]
    assert "9 of its 15 cells left out" in sub["text"]
    cand, base = doc["series"]
    assert base["kind"] == "baseline"
    # both series' figures are over the same 6 cells: Fig. 7 rows have one value per severity
    for s in (cand, base):
        assert set(s["cells"]["ras"]) == {f"{c}-{v}" for c in SUBSET for v in (1, 3, 5)}
        for rows in s["families"].values():
            assert all(len(row) == 3 for row in rows.values())
    # the baseline's Table II is its full run restricted to those cells, not its whole grid
    full = read_run(setup["base"])
    shared = restrict(full, None, sub["corruptions"], sub["severities"])
    assert base["table2"]["ras"]["value"] == pytest.approx(shared.grid.figure("ras"))
    assert shared.grid.figure("ras") != pytest.approx(full.grid.figure("ras"))
    # the gate's baseline value is the value the table shows
    (ras,) = [v for v in doc["verdicts"]["items"] if v.get("figure") == "ras"]
    assert ras["baseline"] == pytest.approx(base["table2"]["ras"]["value"])
    assert ras["current"] == pytest.approx(cand["table2"]["ras"]["value"])
    assert "compared on 6 cells" in (out / "report.html").read_text()
