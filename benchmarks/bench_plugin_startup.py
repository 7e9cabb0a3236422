"""What installing benchc costs an unrelated pytest run: start-up with and without the plugin.

benchc is an auto-loaded ``pytest11`` plugin, so every pytest run of an environment that has it
loads it. This times a one-test project that never uses benchc, run by this interpreter, with
the plugin (as installed) and with ``-p no:benchc.plugin`` (the reference), interleaved in one
invocation so both sides see the same machine load. It prints the median wall time of each side,
the difference (the budget is 0.2 s) and the ratio.

    python benchmarks/bench_plugin_startup.py --repeat 15
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = "def test_one():\n    assert 1 + 1 == 2\n"
BUDGET_S = 0.2


def _time(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15, help="runs per side (interleaved)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp)
        (project / "test_unrelated.py").write_text(TEST)
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        sides = {
            "with benchc": base,
            "without (-p no:benchc.plugin)": [*base, "-p", "no:benchc.plugin"],
        }
        for cmd in sides.values():  # warm the file cache and bytecode once per side
            _time(cmd, project)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.repeat):
            for name, cmd in sides.items():
                times[name].append(_time(cmd, project))
    med = {name: statistics.median(t) for name, t in times.items()}
    with_s, without_s = med["with benchc"], med["without (-p no:benchc.plugin)"]
    for name, t in times.items():
        print(
            f"{name:32s} median {med[name]:.3f} s  (min {min(t):.3f}, max {max(t):.3f}, n={len(t)})"
        )
    added = with_s - without_s
    verdict = "within" if added <= BUDGET_S else "OVER"
    print(
        f"added by benchc: {added:+.3f} s (budget {BUDGET_S} s: {verdict}); "
        f"ratio {with_s / without_s:.3f}"
    )


if __name__ == "__main__":
    main()
