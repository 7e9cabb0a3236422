"""Run notes on the report page: the notes the terminal prints (low option mass, below-chance
accuracy, VSI region fallbacks) are one section of the page and a list in report.json, read
back from a stored run by ``benchc report`` and passed through by the suite's own report."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path

import numpy as np

from benchc import spec
from benchc.results.reader import VSI, read_run
from benchc.results.store import atomic_save_npz, load_npz
from benchc.suite.notes import clean_warnings, stored_run_notes
from benchc.suite.reports import write_report
from benchc_tests.unit.report_runs import make_dataset, make_run


def _rewrite(path: Path, **arrays: np.ndarray) -> None:
    stored = load_npz(path)
    stored.update(arrays)
    atomic_save_npz(path, stored)


def test_a_stored_run_shows_its_low_option_mass_and_vsi_fallbacks(tmp_path):
    run_dir = make_run(tmp_path / "r", make_dataset(tmp_path / "ds", n=12))
    run = read_run(run_dir)
    assert stored_run_notes(run) == []  # every sample answers, no fallback
    mass = np.ones(12, np.float32)
    mass[[2, 5]] = 0.2
    _rewrite(run_dir / f"{spec.CLEAN}.npz", option_mass=mass)
    fallback = np.zeros(12, bool)
    fallback[7] = True
    _rewrite(run_dir / f"{VSI}.npz", fallback=fallback)
    run = read_run(run_dir)
    notes = stored_run_notes(run)
    low = f"2 of 12 samples have clean option mass < {spec.OPTION_MASS_FLAG}"
    assert any(low in n and f"{run.ids[2]}, {run.ids[5]}" in n for n in notes), notes
    assert f"VSI: 1 of 12 samples have no region and blur the whole image: {run.ids[7]}" in notes

    page = write_report(run_dir, tmp_path / "out", n_boot=20, images=False)
    doc = json.loads((page.parent / "report.json").read_text())
    assert doc["notes"] == notes
    html = page.read_text()
    section = re.search(r'<section class="report-section" id="notes">(.*?)</section>', html, re.S)
    assert section is not None
    items = [html_lib.unescape(x) for x in re.findall(r"<li>(.*?)</li>", section.group(1))]
    assert len(items) == 2 and low in items[0]
    # right after the verdict: a release manager reads it before any table
    assert html.index('id="verdict"') < html.index('id="notes"') < html.index('id="table2"')


def test_the_session_notes_replace_the_stored_ones_and_none_is_said(tmp_path):
    from benchc.report.templating import environment

    run_dir = make_run(tmp_path / "r", make_dataset(tmp_path / "ds", n=12))
    said = ["throughput: 120 queries in 3.0 s (40.0 queries/s, pipelined)"]
    page = write_report(run_dir, tmp_path / "a", n_boot=20, images=False, notes=said)
    assert json.loads((page.parent / "report.json").read_text())["notes"] == said
    assert "<li>throughput: 120 queries" in page.read_text()
    none = str(environment().get_template("notes.html.j2").module.run_notes([]))
    assert 'id="run-notes-none"' in none and "<li>" not in none


def test_below_chance_is_one_definition_for_live_and_stored_runs():
    logits = np.array([[0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
    answers, k = np.array([0, 1, 0]), np.array([2, 2, 2])
    (note,) = clean_warnings(logits, np.ones(3), answers, k, ["a", "b", "c"])
    assert note.startswith("clean accuracy 0.000 is below chance (0.500")
    assert clean_warnings(logits, np.ones(3), np.array([1, 0, 1]), k, ["a", "b", "c"]) == []
