"""Issue 40: every fix benchc prints for a missing baseline works as printed (``-m slow``, ~95 s).

``--baseline`` names a folder that does not exist, beside a report folder, a checkpoint folder
and a baseline benchc recorded: the message lists only the recorded baselines (the one beside
the path and the ``--thresholds-dir`` one), and each printed command is run exactly as printed
-- the recording one with its one placeholder, ``<released checkpoint>``, filled in -- and
does what its line says: the gates run (no usage error), the baseline is recorded where the
line says, and the original command then gates against it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchc.suite.config import DEFAULT_MODEL
from benchc.suite.messages import RELEASED

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXIT_USAGE = 4


def _pytest(argv: list[str]) -> subprocess.CompletedProcess:
    assert argv[:2] == ["pytest", "benchc_tests/suite"], argv
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *argv[1:]],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _fixes(text: str) -> list[tuple[str, str]]:
    """``(what the fix says, its command)`` of each numbered fix in a printed message."""
    return re.findall(r"^  \d+\. (.*)\n {7}(pytest .*)$", text, re.M)


def test_every_fix_for_a_missing_baseline_works_as_printed(tmp_path):
    place = tmp_path / "baselines"
    (place / "report").mkdir(parents=True)
    (place / "report" / "report.json").write_text('{"schema": "benchc-report"}')
    (place / "checkpoint").mkdir()
    (place / "checkpoint" / "config.json").write_text('{"model_type": "idefics3"}')
    thresholds = tmp_path / "thresholds"
    shutil.copytree(REPO / "thresholds" / "tiny-vlm", thresholds / "tiny-vlm")
    shutil.copytree(REPO / "thresholds" / "tiny-vlm", place / "release-0")
    missing = place / "release-1"
    argv = ["pytest", "benchc_tests/suite", "--corruptions=fog", "--severities=1",
            "--limit=40", f"--thresholds-dir={thresholds}", f"--results-dir={tmp_path / 'r'}",
            f"--cache-dir={tmp_path / 'c'}", f"--baseline={missing}"]  # fmt: skip

    first = _pytest(argv)
    text = first.stdout + first.stderr
    assert first.returncode == EXIT_USAGE, text[-3000:]
    assert f"no threshold snapshot in {missing}/ (the folder does not exist; " in text
    (listed,) = [line for line in text.splitlines() if line.startswith("baselines recorded ")]
    assert listed == (f"baselines recorded in {thresholds}: tiny-vlm; in {place}: release-0"), (
        listed
    )  # never the report or the checkpoint folder
    fixes = _fixes(text)
    assert len(fixes) == 3, text[-3000:]

    # 1, 2: gate against a recorded baseline, as printed
    for says, printed in fixes[:2]:
        assert "gate against the recorded baseline" in says
        run = _pytest(shlex.split(printed))
        out = run.stdout + run.stderr
        assert run.returncode == 0, (printed, out[-3000:])
        assert " passed" in out and "no baseline" not in out

    # 3: record the released checkpoint's baseline where the line says, then the original gates
    says, printed = fixes[2]
    assert f"written to {missing}/" in says and f"--baseline={missing}" in says
    assert printed.count(RELEASED) == 1 and "<" not in printed.replace(RELEASED, "")
    record = _pytest(shlex.split(printed.replace(RELEASED, str(DEFAULT_MODEL))))
    assert record.returncode == 0, (record.stdout + record.stderr)[-3000:]
    assert (missing / "baseline.manifest").is_file()
    gated = _pytest(argv)
    assert gated.returncode == 0, (gated.stdout + gated.stderr)[-3000:]
