"""Regenerate ``docs/report.png``, the README's and docs site's picture of the report page.

The embedded tiny model washed out with ``--benchc-degrade damp=0.3`` is run through the
default suite against the committed thresholds (its gates fail, as they should), writing the
report; headless Chromium (the browser test's, via Playwright) renders it, and the header with
the verdict box, Table II and the VSI section are stacked, 800 px wide, 256 colours.

    python docs/make_report_png.py          # from the repository root; ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
from pathlib import Path

from PIL import Image

CHROMIUM = os.environ.get("BENCHC_CHROMIUM", "/usr/bin/chromium")
WIDTH = 1280  # the page's viewport; the picture is scaled to OUT_WIDTH
OUT_WIDTH = 800


def run_suite(results: Path, report: Path) -> None:
    """The degraded default run; exit code 1 (failed gates) is the expected outcome."""
    cmd = [
        sys.executable, "-m", "pytest", "benchc_tests/suite", "-q", "-p", "no:cacheprovider",
        "--benchc-degrade=damp=0.3", f"--results-dir={results}", f"--report={report}",
    ]  # fmt: skip
    code = subprocess.run(cmd, check=False).returncode
    if code not in (0, 1) or not (report / "report.html").is_file():
        raise SystemExit(f"the suite run failed (exit {code}); no report at {report}")


def screenshot(page_path: Path) -> Image.Image:
    """The page's header and verdict box, Table II and the VSI section, stacked."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": WIDTH, "height": 900})
        page.goto(page_path.resolve().as_uri(), wait_until="load")
        full = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
        verdict = page.locator(".verdict-box").first.bounding_box()
        boxes = [page.locator(f"section#{s}").bounding_box() for s in ("table2", "vsi")]
        browser.close()
    assert verdict is not None and all(boxes), "the page lacks a verdict, Table II or VSI"
    parts = [full.crop((0, 0, WIDTH, int(verdict["y"] + verdict["height"] + 12)))]
    parts += [full.crop((0, int(b["y"]), WIDTH, int(b["y"] + b["height"]))) for b in boxes]
    out = Image.new("RGB", (WIDTH, sum(p.height for p in parts)), "white")
    y = 0
    for part in parts:
        out.paste(part, (0, y))
        y += part.height
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results-dir", type=Path, default=Path(".benchc/report-png"))
    ap.add_argument("--out", type=Path, default=Path("docs/report.png"))
    args = ap.parse_args()
    report = args.results_dir / "report"
    run_suite(args.results_dir, report)
    image = screenshot(report / "report.html")
    height = round(image.height * OUT_WIDTH / image.width)
    small = image.resize((OUT_WIDTH, height), Image.Resampling.LANCZOS)
    small.quantize(256, method=Image.Quantize.MEDIANCUT).save(args.out, optimize=True)
    print(f"{args.out}: {OUT_WIDTH}x{height}")


if __name__ == "__main__":
    main()
