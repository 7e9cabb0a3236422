"""pytester's in-process runs restore ``sys.modules`` afterwards: a library first loaded inside
one must not be left half re-imported for the tests after it (root ``conftest.py``,
``_whole_libraries_before_pytester``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: The corruption engine imported, its library (and numba's JIT) first used inside an inner run,
#: then here: as any xdist worker may meet them.
REPRO = '''
import numpy as np

from benchc.corruptions.engine import corrupt_array


def test_inner(pytester):
    pytester.makepyfile(
        """
        import numpy as np
        from benchc.corruptions.engine import corrupt_array
        def test_x():
            corrupt_array(np.zeros((32, 32, 3), np.uint8), "glass_blur", 2, seed=0, sample_id="a")
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_after():
    corrupt_array(np.zeros((32, 32, 3), np.uint8), "glass_blur", 3, seed=0, sample_id="b")
'''


def _run(tmp_path: Path, *plugins: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_repro.py").write_text(REPRO)
    args = [a for p in plugins for a in ("-p", p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(tmp_path)])}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            *args,
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            str(tmp_path / "test_repro.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # two fresh pytest processes (~15 s)
def test_pytester_keeps_the_libraries_whole(tmp_path):
    bare = _run(tmp_path, "pytester")  # the hazard: without the fixture the second test breaks
    assert bare.returncode == 1 and "1 failed, 1 passed" in bare.stdout, bare.stdout[-2000:]
    fixed = _run(tmp_path, "conftest")  # this checkout's root conftest (it loads pytester)
    assert fixed.returncode == 0 and "2 passed" in fixed.stdout, fixed.stdout[-2000:]
