"""The report page of a stored run: build time, page size and render time in headless Chromium.

Builds ``report.html`` for RUN_DIR (with ``--baseline`` snapshots overlaid), then loads it in
the distribution's Chromium through Playwright, ``--repeat`` times. The reference, measured in
the same browser and run, is a blank HTML page from disk: the printed ratio is the report's
load-event time over the blank page's (the browser's own floor).

    OMP_NUM_THREADS=1 python benchmarks/bench_report.py .benchc/results/tiny-vlm/testbed-<hash> \\
        --baseline thresholds [--vsi-run .benchc/results/tiny-vlm/vsi-set-<hash>] [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

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
    args = ap.parse_args()
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
