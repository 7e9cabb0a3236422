"""A killed run leaves no process behind: pool workers, the forkserver and the resource tracker
all end with the pytest process that started them, even after SIGKILL (issue 11, item 5)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")

REPO = Path(__file__).resolve().parents[2]


def _session_members(sid: int) -> dict[int, str]:
    """PIDs (and command lines) of live processes in session ``sid``, read from /proc."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] == "Z" or int(fields[3]) != sid:  # state, ..., session (field 6)
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry.name)] = cmd.strip()
    return out


@pytest.mark.slow  # a killed multi-process run (~8 s); the default run stays under 3 min
def test_sigkilled_run_leaves_no_worker_forkserver_or_tracker(pytester, tmp_path):
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    project = make_suite_project(pytester)
    data = save_jsonl(generate(12, 3), tmp_path / "data").parent
    env = {**os.environ, "BENCHC_CORRUPTION_WORKERS": "2", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "suite",
            f"--model={REPO / 'fixtures' / 'tiny-vlm'}",
            f"--dataset={data}",
            "--corruptions=noise,blur",
            f"--results-dir={tmp_path / 'results'}",
            f"--cache-dir={tmp_path / 'cache'}",  # cold: the pool has work to do
            f"--thresholds-dir={tmp_path / 'thresholds'}",
            "--snapshot-update",  # no baseline yet: recording is what computes
            "-p",
            "no:xdist",
            "-p",
            "no:randomly",
            "-q",
        ],
        cwd=project.path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its session id (= its PID) marks every process it starts
    )
    try:
        deadline = time.monotonic() + 120
        members: dict[int, str] = {}
        while time.monotonic() < deadline and proc.poll() is None:
            members = _session_members(proc.pid)
            # pytest + forkserver + resource tracker + 2 workers
            if len(members) >= 5 and any("forkserver" in c for c in members.values()):
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before its pool started"
        assert len(members) >= 5, members
        os.kill(proc.pid, signal.SIGKILL)  # only pytest, as the OOM killer would
        proc.wait()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _session_members(proc.pid):
            time.sleep(0.2)
        left = _session_members(proc.pid)
        assert not left, f"processes of the killed run still alive: {left}"
    finally:
        if proc.poll() is None or _session_members(proc.pid):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait()
