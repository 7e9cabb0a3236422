"""Provenance (issue 32 item 4): report.json and the page say where the numbers come from
(when and by which command they were computed, benchc version and commit, model and its
content hash, dataset fingerprint, seed, torch/transformers, device, dtype), and the suite run
that wrote the report."""

from __future__ import annotations

import json
import re
import shlex
import sys
from html import escape

from benchc import __version__, provenance
from benchc.results.store import read_manifest
from benchc.suite.reports import write_report
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline


def test_the_session_is_its_date_command_line_version_and_commit():
    s = provenance.session()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", s["date"])
    assert s["command_line"] == shlex.join(sys.orig_argv) and s["benchc"] == __version__
    commit = provenance.git_commit()  # this checkout is a git work tree
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", commit)
    assert s["benchc_commit"] == commit


def test_report_json_and_the_page_carry_the_provenance(tmp_path):
    ds = make_dataset(tmp_path / "ds", n=12)
    run = make_run(tmp_path / "res", ds, model="toy-vlm")
    folder = record_baseline(run, tmp_path / "thr")
    env = {"torch": "2.13.0", "dtype": "float32"}
    meta = {"name": "toy-vlm", "model": "org/released", "environment": env}
    (folder / "baseline.manifest").write_text(json.dumps(meta))
    session = {"date": "2026-12-03T09:00:00+00:00", "command_line": "pytest --model=x --seed=3",
               "benchc": __version__, "benchc_commit": "f" * 40}  # fmt: skip
    out = tmp_path / "rep"
    write_report(run, out, thresholds_dir=tmp_path / "thr", images=False, n_boot=20,
                 session=session)  # fmt: skip
    doc = json.loads((out / "report.json").read_text())
    p = doc["provenance"]
    manifest = read_manifest(run)
    assert p["session"] == session
    assert p["run"]["dataset_fingerprint"] == manifest["dataset_fingerprint"]
    assert p["run"]["model_fingerprint"] == manifest["model_fingerprint"]
    assert p["run"]["seed"] == 0 and p["run"]["model"] == "toy-vlm"
    assert p["baseline"]["model"] == "org/released"
    page = (out / "report.html").read_text()
    block = page[page.index('<details id="provenance">') :]
    for value in (session["command_line"], session["date"], "f" * 40,
                  manifest["dataset_fingerprint"], "org/released", "torch 2.13.0"):  # fmt: skip
        assert escape(value, quote=False) in block, value


def test_the_command_line_is_the_sessions_own():
    argv = list(sys.orig_argv)
    assert provenance.command_line() == shlex.join(argv)
    # pytest.main(args) inside another process: the arguments it was really given
    assert provenance.command_line(["suite", "--seed=3"]) == "pytest suite --seed=3"
    if len(argv) > 1:  # this process's own arguments: the whole command as typed
        assert provenance.command_line(argv[-1:]) == shlex.join(argv)
