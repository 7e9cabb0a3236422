"""Issue 40, end to end (``-m slow``, ~50 s): ``pytest --from-store`` over a store holding one
truncated array file changes no byte of it, fails with one error naming the file, prints the
command that mends it, and that command, run exactly as printed, recomputes that file alone
(said on one summary line) so the next ``--from-store`` run passes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchc_tests.unit.untouched import assert_untouched, tree

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GRID = ["--corruptions=fog", "--severities=1", "--limit=16"]


def _pytest(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", *args],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_a_damaged_store_is_only_read_and_the_printed_fix_mends_it(tmp_path):
    store, cache = tmp_path / "store", tmp_path / "cache"
    first = _pytest(["benchc_tests/suite", "-k", "test_cell", *GRID,
                     f"--results-dir={store}", f"--cache-dir={cache}"])  # fmt: skip
    assert first.returncode == 0, first.stdout[-3000:]
    (fog,) = store.glob("*/testbed-*/fog-1.npz")
    intact = fog.read_bytes()
    fog.write_bytes(intact[:200])  # truncated, as by a copy cut short
    before = tree(store)

    gated = _pytest(["benchc_tests/suite", "-k", "test_cell", *GRID, f"--from-store={store}",
                     f"--cache-dir={cache}"])  # fmt: skip
    out = gated.stdout + gated.stderr
    assert gated.returncode == 4, out[-3000:]
    assert_untouched(before, store)
    assert f"unreadable result file {fog}" in out and "left as it is" in out
    assert "StoreRepairWarning" not in out
    (printed,) = [
        line.split("the command that recomputes it: ", 1)[1]
        for line in out.splitlines()
        if "the command that recomputes it: " in line
    ]
    assert f"--results-dir={store}" in printed and "--from-store" not in printed

    argv = shlex.split(printed)
    assert argv[0] == "pytest"
    mended = _pytest(argv[1:])  # exactly as printed (run with this interpreter's pytest)
    text = mended.stdout + mended.stderr
    assert mended.returncode in (0, 1), text[-3000:]  # 1: a smoke run's gate, not the store
    assert f"note: repaired: 1 damaged stored file(s) of {fog.parent} recomputed (fog-1.npz)" in (
        text
    )
    assert "StoreRepairWarning" not in text
    assert fog.read_bytes() == intact

    again = _pytest(["benchc_tests/suite", "-k", "test_cell", *GRID, f"--from-store={store}",
                     f"--cache-dir={cache}"])  # fmt: skip
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    shutil.rmtree(store)
