"""``benchc compare`` (issue 32 item 6): a summary line, paired differences ± SE over the
same samples with their significance, and Table VI in words when a figure is undefined."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchc.metrics.stats import bootstrap_indices
from benchc.report.agreement import table_vi
from benchc.results.reader import StoredRun, read_run
from benchc.suite.reports import compare_runs
from benchc_tests.unit.report_runs import make_dataset, make_run


@pytest.mark.slow  # two runs compared, page and JSON (~4 s)
def test_compare_stores_paired_differences(tmp_path):
    ds = make_dataset(tmp_path / "ds", n=24)
    a = make_run(tmp_path / "res", ds, model="a")
    b = make_run(tmp_path / "res", ds, model="b", seed=1, damp=1.0)
    out = tmp_path / "cmp"
    compare_runs([a, b], out, images=False, n_boot=20, n_permutations=200)
    doc = json.loads((out / "report.json").read_text())
    (pair,) = doc["compare"]["paired"]["pairs"]
    assert pair["n"] == 24  # the CLI prints this summary: test_report_compare.py
    assert pair["summary"].startswith("b / ds − a / ds on 24 paired samples: ")
    diffs = {d["figure"]: d for d in pair["differences"]}
    # the clean-accuracy difference and its paired SE, by the definition: the same resampled
    # ids on both runs, the SE (ddof 1) of the difference of the two means
    ra, rb = read_run(a), read_run(b)
    right_a = (ra.clean_logits.argmax(1) == ra.answers).astype(float)
    right_b = (rb.clean_logits.argmax(1) == rb.answers).astype(float)
    reps = [right_b[rows].mean() - right_a[rows].mean() for rows in bootstrap_indices(24, 1000, 0)]
    acc = diffs["acc_clean"]
    assert acc["diff"] == pytest.approx(right_b.mean() - right_a.mean())
    assert acc["se"] == pytest.approx(np.std(reps, ddof=1))
    assert acc["significant"] == (abs(acc["diff"]) >= 2 * acc["se"])
    sig = [d for d in pair["differences"] if d["significant"]]
    assert f"{len(sig)} of {len(diffs)} Table II figures differ significantly" in pair["summary"]
    html = (out / "report.html").read_text()
    assert 'class="paired"' in html and "± paired SE" in html


def test_table_vi_names_an_undefined_figure_instead_of_a_raw_nan():
    rng = np.random.default_rng(0)
    n = 10

    def run(clean_right: bool) -> StoredRun:
        answers = np.zeros(n, dtype=np.int64)
        clean = rng.normal(0, 0.1, (n, 4))
        clean[:, 0 if clean_right else 1] += 3
        cube = clean[:, None, None, :] + rng.normal(0, 1.0, (n, 1, 2, 4))
        return StoredRun(Path("m"), {"settings": {"seed": 0}}, tuple(f"s{i}" for i in range(n)),
                         answers, np.full(n, 4), ("fog",), (1, 2), clean.astype(np.float32),
                         cube.astype(np.float32))  # fmt: skip

    t = table_vi([run(True), run(False)], ["ok", "never-right"])  # clean never right: no Rel.
    assert t["available"] and "relative_robustness" not in t["metrics"] and "ras" in t["metrics"]
    assert "relative_robustness is undefined for never-right" in t["note"]
    assert "nan" not in t["note"].lower()
