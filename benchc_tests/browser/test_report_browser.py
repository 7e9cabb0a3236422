"""The report page in a real headless Chromium (the distribution's package, driven by
Playwright): it loads with no console errors, every section and figure renders, the
failing-gate links land on their rows, and a screenshot is written to the test's tmp dir."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from benchc.report import plots
from benchc.report.page import SECTIONS
from benchc.suite.reports import write_report
from benchc_tests.unit.report_runs import make_dataset, make_run, verdict

pytestmark = pytest.mark.browser

#: The browser binary; Debian's ``chromium`` package puts it here.
CHROMIUM = os.environ.get("BENCHC_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def browser():
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        pytest.fail(
            f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set BENCHC_CHROMIUM)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    run = make_run(root / "results", make_dataset(root / "toy"))
    vs = [
        verdict("fog-2", "ras", "fail", movers=[["syn3-00004", 0.1, -0.4]]),
        verdict("gaussian_noise-1", "accuracy", "fail"),
        verdict("fog-1", "ras", "improved"),
        verdict("model", "r_c", "pass"),
    ]
    return write_report(run, root / "out", verdicts=vs, n_boot=50)


def test_report_renders_in_chromium(browser, report, tmp_path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(report.as_uri(), wait_until="load")
    timing = page.evaluate(
        "() => { const n = performance.getEntriesByType('navigation')[0];"
        " return {load: n.loadEventEnd, dom: n.domContentLoadedEventEnd}; }"
    )
    assert errors == []
    assert [u for u in requests if not u.startswith(("file:", "data:"))] == []  # no network

    sections = page.locator("section.report-section")
    assert sections.count() == len(SECTIONS)
    for i in range(sections.count()):
        box = sections.nth(i).bounding_box()
        assert box is not None and box["height"] > 20, SECTIONS[i]
    svgs = page.locator("figure.fig > svg")
    assert svgs.count() == len(plots.PLOTS) - 1  # no accuracy-by-position: the run has no rotations
    for i in range(svgs.count()):
        box = svgs.nth(i).bounding_box()
        assert box is not None and box["width"] > 200 and box["height"] > 100
    thumbs = page.locator(".card img")
    assert thumbs.count() > 0
    assert page.evaluate(
        "() => [...document.querySelectorAll('.card img')].every(i => i.naturalWidth > 0)"
    )

    # verdict first: the failing gates, each a link to its row
    links = page.locator("#verdict a.gate-link")
    assert links.count() == 2
    first_row = page.locator("#verdict-table tr.fail").first
    assert first_row.bounding_box()["y"] < page.locator("#table2").bounding_box()["y"]
    for i in range(links.count()):
        target = links.nth(i).get_attribute("href")
        links.nth(i).click()
        assert page.evaluate("location.hash") == target
        top = page.evaluate(
            f"document.getElementById({json.dumps(target[1:])}).getBoundingClientRect().top"
        )
        assert 0 <= top < 900, (target, top)

    page.evaluate("window.scrollTo(0, 0)")
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    size = report.stat().st_size
    assert size < 5_000_000
    print(f"\nreport.html {size / 1024:.0f} KiB, load {timing['load']:.0f} ms, screenshot {shot}")
    page.close()


def test_r_w_matrix_and_gate_cell_card_in_chromium(browser, report):
    """Fig. 7's R_w panel is drawn beside R_c (same row, to its right) with report.json's
    numbers; the failing cell gate's card shows that cell's image and says so; the header
    names the run's folder as display_path shows it."""
    from benchc.fsutil import display_path

    doc = json.loads((report.parent / "report.json").read_text())
    s = doc["series"][0]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri(), wait_until="load")

    rc, rw = page.locator("#family-r_c-0"), page.locator("#family-r_w-0")
    a, b = rc.bounding_box(), rw.bounding_box()
    assert a and b and b["x"] > a["x"] + a["width"] / 2 and abs(b["y"] - a["y"]) < 5
    assert b["width"] > 50 and b["height"] > 30
    texts = rw.locator("text").all_text_contents()
    assert any("R_w (clean-wrong)" in t for t in texts)
    for row in s["families"]["r_w"].values():
        for v in row:
            assert plots.cell_text(v, signed=True) in [t.strip() for t in texts]

    card = page.locator("#sample-syn3-00004")
    assert card.get_attribute("data-cell") == "fog-2"
    assert card.get_attribute("data-cell-basis") == "gate"
    img = card.locator("img.thumb-corrupted")
    assert img.get_attribute("data-cell") == "fog-2"
    assert img.evaluate("i => i.naturalWidth") > 0
    assert "the cell of gate RAS fog-2 (fail)" in card.locator(".cell-note").inner_text()
    card.locator("a.card-gate").click()
    assert page.evaluate("location.hash") == "#gate-fog-2-ras"

    header = page.locator("header").inner_text()
    assert s["source"] == display_path(s["source"]) and s["source"] in header
    page.close()


def test_vsi_tables_render_with_report_json_numbers(browser, report):
    """VSI Tables 1-3, both supports and the reliability diagram render; every number is
    defined (no "n/a" in the section) and is report.json's."""
    doc = json.loads((report.parent / "report.json").read_text())
    v = doc["series"][0]["vsi"]
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri(), wait_until="load")
    section = page.locator("section#vsi")
    assert "n/a" not in section.inner_text()
    for table in ("#vsi-table1", "#vsi-supports", "#vsi-table2", "#vsi-table3"):
        box = page.locator(table).bounding_box()
        assert box is not None and box["height"] > 20, table
    assert page.locator("#vsi-table1 tr").count() == 1 + len(v["table1"]) == 3
    supports = page.locator("#vsi-supports").inner_text()
    assert "gated" in supports and "reported" in supports
    t2 = page.locator("#vsi-table2").inner_text()
    g = v["gap"]
    for key in ("probe_low", "probe_high", "change_low", "change_high"):
        assert f"{g[key]:.3f}" in t2, key
    assert f"±{g['probe_low_std']:.2f}" in t2 and f"{g['gap']:+.3f}" in t2
    t3 = page.locator("#vsi-table3").inner_text()
    for row in v["signals"]["signals"].values():
        lo, hi = row["auroc_ci"]
        assert f"{row['auroc']:.3f}" in t3 and f"[{lo:.2f}, {hi:.2f}]" in t3
    fig = page.locator("#fig-vsi-reliability svg")
    assert fig.bounding_box()["height"] > 100
    assert f"ECE {v['signals']['ece']:.3f}" in " ".join(fig.locator("text").all_text_contents())
    page.close()


def test_compare_page_shows_the_cross_run_tables_in_chromium(browser, tmp_path):
    """benchc compare's agreement section (VSI rank agreement, Bench-C Table VI) renders with
    report.json's numbers, and Table 2 of the second run reads the first run's pool."""
    from benchc.suite.reports import compare_runs

    ds = make_dataset(tmp_path / "toy")
    runs = [make_run(tmp_path / "r", ds, model=m, seed=s) for m, s in (("a", 0), ("b", 1))]
    page_path = compare_runs(runs, tmp_path / "out", n_boot=20, n_permutations=999)
    doc = json.loads((page_path.parent / "report.json").read_text())
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(page_path.as_uri(), wait_until="load")
    rank = page.locator("#vsi-agreement")
    assert rank.bounding_box()["height"] > 20
    (pair,) = doc["agreement"]["vsi"]["pairs"]
    assert f"{pair['rho']:+.3f}" in rank.inner_text()
    assert page.locator("#table6").bounding_box()["height"] > 20
    assert doc["series"][1]["vsi"]["gap"]["pool"] == "reference"
    assert "reference's" in page.locator("#vsi-table2").inner_text()
    page.close()
