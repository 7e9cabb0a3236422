"""The report page of a stored run: build time, page size and render time in headless Chromium.

Builds ``report.html`` for RUN_DIR (with ``--baseline`` snapshots overlaid), then loads it in
the distribution's Chromium through Playwright, ``--repeat`` times. The reference, measured in
the same browser and run, is a blank HTML page from disk: the printed ratio is the report's
load-event time over the blank page's (the browser's own floor).

    OMP_NUM_THREADS=1 python benchmarks/bench_report.py .benchc/results/tiny-vlm/testbed-<hash> \\
        --baseline thresholds [--vsi-run .benchc/results/tiny-vlm/vsi-set-<hash>] [--repeat 5]

``--reference COMMIT`` measures the page's CPU instead (``time.process_time``, one process per
side, interleaved, ``--repeat`` pages each after one unmeasured page that pays the imports):
this checkout against COMMIT checked out with ``git worktree add`` into a temporary folder.
Per side: the whole page build (data, verdicts, figures, HTML), the figures alone
(``plots.render_all`` on a fresh document: nothing drawn before), and the figures of the same
run drawn again in the same process (a second page of the run).

    OMP_NUM_THREADS=1 python benchmarks/bench_report.py RUN --baseline thresholds \\
        --vsi-run VSI_RUN --reference HEAD~1 --repeat 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: One side's measurement, run in a child process with that side's checkout first on the path.
CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import matplotlib
matplotlib.use("Agg")
from benchc.report import plots, write
run, base, vsi, repeat = Path(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
kw = dict(thresholds_dir=Path(base) if base else None, vsi_dir=Path(vsi) if vsi else None)
docs, real = [], plots.render_all
def keep(doc, keys=None):
    docs.append(doc)
    return real(doc, keys)
plots.render_all = keep
def forget():
    if hasattr(plots, "_DRAWN"):
        plots._DRAWN.clear()
out = {"page": [], "figures": [], "figures_again": []}
with tempfile.TemporaryDirectory() as tmp:
    write.write_report(run, Path(tmp) / "warm", **kw)
    for i in range(repeat):
        forget()
        t = time.process_time()
        write.write_report(run, Path(tmp) / f"p{i}", **kw)
        out["page"].append(time.process_time() - t)
        forget()
        t = time.process_time()
        real(docs[-1])
        out["figures"].append(time.process_time() - t)
        t = time.process_time()
        real(docs[-1])
        out["figures_again"].append(time.process_time() - t)
print(json.dumps(out))
"""


def cpu_sides(args: argparse.Namespace) -> None:
    """Page CPU of this checkout against ``args.reference``, one child process per side and
    round, interleaved. Each child runs in its side's checkout: the run, baseline and VSI
    folders are made absolute first (a relative one named the reference's own folder, or none)."""
    args.run, args.baseline, args.vsi_run = (
        None if p is None else Path(p).resolve() for p in (args.run, args.baseline, args.vsi_run)
    )
    with tempfile.TemporaryDirectory() as tmp:
        ref = Path(tmp) / "reference"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(ref),
                        args.reference], check=True, capture_output=True)  # fmt: skip
        try:
            sides = {"this checkout": ROOT, f"reference {args.reference}": ref}
            got: dict[str, dict[str, list[float]]] = {k: {} for k in sides}
            env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
            for _ in range(args.rounds):
                for label, path in sides.items():
                    done = subprocess.run(
                        [sys.executable, "-c", CHILD, str(path), str(args.run),
                         str(args.baseline or ""), str(args.vsi_run or ""), str(args.repeat)],
                        capture_output=True, text=True, env=env, cwd=path,
                    )  # fmt: skip
                    if done.returncode:
                        sys.exit(f"{label} failed ({done.returncode}):\n{done.stderr[-3000:]}")
                    for k, v in json.loads(done.stdout.strip().splitlines()[-1]).items():
                        got[label].setdefault(k, []).extend(v)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref)],
                           check=False, capture_output=True)  # fmt: skip
    print(f"page CPU (s, median of {args.rounds} x {args.repeat}; load {os.getloadavg()[0]:.2f})")
    print(f"{'side':<34} {'page':>8} {'figures':>8} {'figures again':>14}")
    med = {k: {m: statistics.median(v) for m, v in d.items()} for k, d in got.items()}
    for label, m in med.items():
        print(f"{label:<34} {m['page']:>8.3f} {m['figures']:>8.3f} {m['figures_again']:>14.3f}")
    this, ref_m = med.values()
    print(f"{'ratio this / reference':<34} {this['page'] / ref_m['page']:>8.2f} "
          f"{this['figures'] / ref_m['figures']:>8.2f} "
          f"{this['figures_again'] / ref_m['figures_again']:>14.2f}")  # fmt: skip


ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip
LOAD = "() => performance.getEntriesByType('navigation')[0].loadEventEnd"


def main() -> None:
    from playwright.sync_api import sync_playwright

    from benchc.suite.reports import write_report  # the report with the suite's facts

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--baseline", type=Path, default=None)
    ap.add_argument("--vsi-run", type=Path, default=None, help="the VSI set's run folder")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--reference", default=None, help="measure page CPU against this commit")
    ap.add_argument("--rounds", type=int, default=2, help="with --reference: child processes")
    args = ap.parse_args()
    if args.reference:
        cpu_sides(args)
        return
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        page_path = write_report(
            args.run, Path(tmp), thresholds_dir=args.baseline, vsi_dir=args.vsi_run
        )
        build_s = time.perf_counter() - t0
        blank = Path(tmp) / "blank.html"
        blank.write_text("<!DOCTYPE html><html><body></body></html>\n")
        times: dict[str, list[float]] = {"blank page (reference)": [], "report.html": []}
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=ARGS)
            for _ in range(args.repeat):
                for label, path in (("blank page (reference)", blank), ("report.html", page_path)):
                    page = browser.new_page(viewport={"width": 1280, "height": 900})
                    page.goto(path.as_uri(), wait_until="load")
                    times[label].append(float(page.evaluate(LOAD)))
                    page.close()
            browser.close()
        size = page_path.stat().st_size
        json_size = (page_path.parent / "report.json").stat().st_size
    ref = statistics.median(times["blank page (reference)"])
    print(f"report build (data + figures + page): {build_s:.2f} s")
    print(f"report.html {size / 1024:.0f} KiB, report.json {json_size / 1024:.0f} KiB")
    print(f"{'page':<26} {'median load ms':>15} {'x reference':>12}")
    for label, values in times.items():
        med = statistics.median(values)
        print(f"{label:<26} {med:>15.1f} {med / ref if ref else float('nan'):>12.1f}")


if __name__ == "__main__":
    main()
