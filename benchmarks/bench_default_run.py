"""The default ``pytest`` of this checkout: cold, warm, and the start-up before the first case,
for this checkout and a reference commit, measured in one invocation, interleaved.

- cold: a fresh corruption cache (``BENCHC_CACHE_DIR`` at a new empty folder, as on a new machine
  or in CI) and a fresh results store (``--results-dir`` at a new folder, as in a fresh clone);
- warm: the same command again, cache and results as the cold run left them;
- start-up: a one-cell run of the suite (warm), from launching the process to the first case
  starting (imports, options, collection, model and dataset loading, the baseline check).

Each run is a child process; its wall time, its CPU time (user + sys of it and every process it
waited for: ``os.wait4``), the machine's busy CPU time over the run (``/proc/stat``: it also counts
processes nobody waits for, such as the corruption pool's workers under multiprocessing's fork
server, which ``wait4`` misses; on a quiet machine it is the run's) and pytest's exit status are
printed, then the ratios this/reference.
The reference is checked out with ``git worktree add`` into a temporary folder (removed at the
end); this side is the checkout the script lies in, uncommitted changes included. The machine's
load average before and after is printed: on a shared machine compare CPU times as well as wall.

    python benchmarks/bench_default_run.py [--reference HEAD~1] [--repeat 1]
        [--pytest-args "..."] [--startup-args "..."]

``--pytest-args`` replaces the default run's arguments (default: none, the README's ``pytest``);
the slow test runs the script on a miniature (a few cases) that way.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The one-cell warm run whose start-up is measured (the issue's measure).
STARTUP_ARGS = "benchc_tests/suite --corruptions=fog --severities=1 -k test_cell"

#: A ``-p`` plugin writing the wall-clock time at which the first case starts.
PROBE = """
import os, time

_done = False


def pytest_runtest_logstart(nodeid, location):
    global _done
    if not _done:
        _done = True
        with open(os.environ["BENCHC_BENCH_FIRST_CASE"], "w") as f:
            f.write(repr(time.time()))
"""


@dataclass
class Timing:
    wall: float
    cpu: float
    rc: int
    first_case: float | None  # seconds from launch to the first case starting
    machine_cpu: float | None = None  # busy CPU seconds of the whole machine (Linux)


def machine_busy() -> float | None:
    """Busy CPU seconds of the machine since boot (user, nice, system, irq, softirq), or None
    where ``/proc/stat`` does not exist."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def run_pytest(code: Path, args: list[str], env: dict[str, str], probe_dir: Path) -> Timing:
    """``python -m pytest ARGS`` in ``code`` (its benchc imported), timed."""
    mark = probe_dir / "first-case"
    mark.unlink(missing_ok=True)
    env = {
        **env,
        "PYTHONPATH": os.pathsep.join([str(code), str(probe_dir)]),
        "BENCHC_BENCH_FIRST_CASE": str(mark),
    }
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "benchc_probe"]
    busy_before = machine_busy()
    began = time.time()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([*cmd, *args], cwd=code, env=env, stdout=log, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.time() - began
        busy_after = machine_busy()
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            log.seek(0)
            tail = log.read()[-3000:].decode(errors="replace")
            print(f"  pytest exited {proc.returncode} in {code}:\n{tail}", flush=True)
    first = float(mark.read_text()) - began if mark.exists() else None
    machine = None if busy_before is None or busy_after is None else busy_after - busy_before
    return Timing(wall, usage.ru_utime + usage.ru_stime, proc.returncode, first, machine)


def checkout(ref: str, into: Path) -> Path:
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
        check=True,
        capture_output=True,
    )
    return into


def describe(code: Path) -> str:
    done = subprocess.run(
        ["git", "-C", str(code), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(code), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()[:80] + (" (+ uncommitted changes)" if dirty.stdout.strip() else "")


def measure(
    sides: dict[str, Path], default_args: list[str], startup_args: list[str], repeat: int, tmp: Path
) -> dict[str, dict[str, list[Timing]]]:
    """Every side's cold, warm and start-up runs, interleaved (sides alternate their order
    every repetition)."""
    probe_dir = tmp / "probe"
    probe_dir.mkdir()
    (probe_dir / "benchc_probe.py").write_text(PROBE)
    out: dict[str, dict[str, list[Timing]]] = {
        s: {"cold": [], "warm": [], "startup": []} for s in sides
    }
    names = list(sides)
    for rep in range(repeat):
        order = names if rep % 2 == 0 else names[::-1]
        folders = {}
        for side in order:  # cold: new cache, new results
            cache, results = tmp / f"{side}-{rep}-cache", tmp / f"{side}-{rep}-results"
            cache.mkdir()
            folders[side] = (cache, results)
        env_of = {s: {**os.environ, "BENCHC_CACHE_DIR": str(folders[s][0])} for s in sides}
        args_of = {s: [*default_args, f"--results-dir={folders[s][1]}"] for s in sides}
        for kind in ("cold", "warm"):
            for side in order:
                print(f"[{rep + 1}/{repeat}] {side}: {kind} run ...", flush=True)
                t = run_pytest(sides[side], args_of[side], env_of[side], probe_dir)
                out[side][kind].append(t)
                machine = f", machine {t.machine_cpu:.1f} s busy" if t.machine_cpu else ""
                print(f"  {t.wall:.1f} s wall, {t.cpu:.1f} s CPU{machine}, exit {t.rc}", flush=True)
        for side in order:
            print(f"[{rep + 1}/{repeat}] {side}: start-up ...", flush=True)
            args = [*startup_args, f"--results-dir={folders[side][1]}"]
            t = run_pytest(sides[side], args, env_of[side], probe_dir)
            out[side]["startup"].append(t)
            print(f"  first case after {t.first_case or float('nan'):.1f} s", flush=True)
    return out


def median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def report(results: dict[str, dict[str, list[Timing]]], ref: str = "reference") -> bool:
    """Prints the table and the ratios; returns whether every run passed."""
    print(
        "\nside       measure   wall s (median, all)          CPU s (median)  machine busy s  exit"
    )
    for side, kinds in results.items():
        for kind, runs in kinds.items():
            if kind == "startup":
                firsts = [r.first_case for r in runs if r.first_case is not None]
                walls = ", ".join(f"{v:.1f}" for v in firsts)
                value = median(firsts) if firsts else float("nan")
                print(f"{side:10s} start-up  {value:7.1f} ({walls}) to the first case")
                continue
            walls = ", ".join(f"{r.wall:.1f}" for r in runs)
            codes = ",".join(str(r.rc) for r in runs)
            busy = [r.machine_cpu for r in runs if r.machine_cpu is not None]
            print(
                f"{side:10s} {kind:9s} {median([r.wall for r in runs]):7.1f} ({walls})"
                f"{median([r.cpu for r in runs]):16.1f}"
                f"{median(busy) if busy else float('nan'):16.1f}  {codes}"
            )
    this, base = results["this"], results[ref]
    parts = []
    for kind in ("cold", "warm"):
        wall = median([r.wall for r in this[kind]]) / median([r.wall for r in base[kind]])
        cpu = median([r.cpu for r in this[kind]]) / median([r.cpu for r in base[kind]])
        part = f"{kind} wall x{wall:.2f}, CPU x{cpu:.2f}"
        busy = [[r.machine_cpu for r in s[kind] if r.machine_cpu] for s in (this, base)]
        if all(busy):
            part += f", machine busy x{median(busy[0]) / median(busy[1]):.2f}"
        parts.append(part)
    firsts = [[r.first_case for r in s["startup"] if r.first_case] for s in (this, base)]
    if all(firsts):
        parts.append(f"start-up x{median(firsts[0]) / median(firsts[1]):.2f}")
    print(f"this/{ref}: " + "; ".join(parts))
    return all(r.rc == 0 for kinds in results.values() for runs in kinds.values() for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", default="HEAD~1", help="the commit compared against")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--pytest-args", default="", help="the default run's arguments")
    parser.add_argument("--startup-args", default=STARTUP_ARGS, help="the start-up run's")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-default-run-") as name:
        tmp = Path(name)
        ref = checkout(args.reference, tmp / "reference")
        try:
            sides = {"this": ROOT, "reference": ref}
            print(f"this:      {ROOT}: {describe(ROOT)}")
            print(f"reference: {args.reference}: {describe(ref)}")
            print(f"cores: {os.cpu_count()}; load average before: {load_before[0]:.2f}")
            results = measure(
                sides,
                shlex.split(args.pytest_args),
                shlex.split(args.startup_args),
                args.repeat,
                tmp,
            )
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)],
                capture_output=True,
            )
    print(f"load average after: {os.getloadavg()[0]:.2f} (1 min), {os.getloadavg()[1]:.2f} (5 min)")
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
