"""Running a ``benchmarks/`` script from a test, on a miniature configuration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_benchmark(script: str, *args: str, timeout: int = 900) -> str:
    """``python benchmarks/<script> <args>`` from the checkout's root; its stdout, once it
    exited 0 (else the assertion shows the tails of both streams)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout
