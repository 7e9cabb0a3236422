"""The report on a phone (390 px) and a laptop (1280 px), in headless Chromium: no horizontal
page scroll (a wide table or figure scrolls inside its own box), no visible text under 9 px
(an SVG label's font size times its figure's scale on screen), a mover's link lands on its
sample card. On a small grid gated against a recorded baseline, on the 95-cell grid and on a
comparison of two runs.
Full-page screenshots go to the test's tmp dir. Legend placement and blank panels are checked
on matplotlib's drawing itself (benchc_tests/unit/test_report_figures.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchc import spec
from benchc_tests.browser.test_report_browser import browser  # noqa: F401 (fixture)
from benchc_tests.browser.test_report_trust import _report

pytestmark = pytest.mark.browser

WIDTHS = (390, 1280)
#: The smallest text a reader gets, in CSS px.
MIN_PX = 9.0
#: Every visible element's own text, with its size on screen (an SVG text scaled by its CTM).
SMALL_TEXT = """(min) => {
  const out = [];
  for (const el of document.querySelectorAll('body *')) {
    if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
    if (!el.getClientRects().length) continue;  // not rendered (a closed <details>, hidden)
    let px = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement) {
      const m = el.getScreenCTM();
      px *= Math.sqrt(Math.abs(m.a * m.d - m.b * m.c));
    }
    if (px < min) out.push([el.closest('[id]')?.id, el.textContent.trim().slice(0, 40), px]);
  }
  return out;
}"""


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("small"), ("fog", "gaussian_noise"), 18, True)


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("full"), spec.CORRUPTIONS, 24, False)


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> Path:
    """``benchc compare`` of two checkpoints: its paired differences and agreement tables."""
    from benchc.suite.reports import compare_runs
    from benchc_tests.unit.report_runs import make_dataset, make_run

    root = tmp_path_factory.mktemp("compared")
    ds = make_dataset(root / "ds", n=18)
    runs = [make_run(root / "r", ds, model=m, seed=k, damp=0.5 * k)
            for k, m in enumerate(("released-checkpoint", "candidate-checkpoint"))]  # fmt: skip
    return compare_runs(runs, root / "out", n_boot=20, n_permutations=99)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["small", "full", "compared"])
def test_no_page_scroll_and_no_text_under_9px(browser, which, width, request, tmp_path):  # noqa: F811
    report = request.getfixturevalue(which)
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.goto(report.as_uri(), wait_until="load")
    scroll, inner = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
    assert scroll <= inner, f"page {scroll} px wide in a {inner} px window"
    small_text = page.evaluate(SMALL_TEXT, MIN_PX)
    assert small_text == [], f"{len(small_text)} texts under {MIN_PX} px: {small_text[:5]}"
    n_svg_text = page.evaluate("document.querySelectorAll('figure.fig svg text').length")
    assert n_svg_text > 100  # the figures' labels were measured, not absent
    # every figure and table is inside the page: a wide one scrolls in its own box
    boxes = page.evaluate(
        "[...document.querySelectorAll('figure.fig, table')]"
        ".map(e => e.getBoundingClientRect().right)"
    )
    assert boxes and max(boxes) <= inner
    page.screenshot(path=str(tmp_path / f"{which}-{width}.png"), full_page=True)
    page.close()


def test_a_mover_link_lands_on_its_card_on_a_phone(browser, small):  # noqa: F811
    page = browser.new_page(viewport={"width": 390, "height": 800})
    page.goto(small.as_uri(), wait_until="load")
    link = page.locator("#verdict-table a.mover").first
    target = link.get_attribute("href")
    link.click()
    assert page.evaluate("location.hash") == target
    card = page.locator(target)
    assert card.get_attribute("class") == "card"
    box = card.bounding_box()
    assert 0 <= box["y"] < 800 and box["x"] >= 0 and box["x"] + box["width"] <= 390
    # clean and corrupted side by side, the baseline's answer beside the candidate's
    clean = card.locator("img.thumb-clean").bounding_box()
    bad = card.locator("img.thumb-corrupted").bounding_box()
    assert abs(clean["y"] - bad["y"]) < 2 and bad["x"] > clean["x"] + clean["width"] - 1
    said = card.locator(".card-answers .said").all_inner_texts()
    assert [s.split(":")[0] for s in said] == ["baseline", "candidate"]
    page.close()


#: Every figure's texts whose box on screen is not inside the figure's own ``<svg>`` box (the
#: figure's viewBox as drawn): [figure id, text, how far out in px].
OUTSIDE = """() => {
  const out = [];
  for (const fig of document.querySelectorAll('figure.fig')) {
    const svg = fig.querySelector(':scope > svg');
    if (!svg) continue;
    const f = svg.getBoundingClientRect();
    for (const t of svg.querySelectorAll('text')) {
      if (!t.textContent.trim()) continue;
      const b = t.getBoundingClientRect();
      const over = Math.max(f.left - b.left, f.top - b.top, b.right - f.right, b.bottom - f.bottom);
      if (over > 0.5) out.push([fig.id, t.textContent.trim().slice(0, 40), over]);
    }
  }
  return out;
}"""


@pytest.mark.parametrize("which", ["small", "full", "compared"])
def test_every_figure_label_lies_inside_its_figure(browser, which, request):  # noqa: F811
    """No label is clipped: every text of every figure, as Chromium lays it out in its font,
    lies inside its figure's box (the heatmaps and family matrices are written straight as SVG,
    sized by benchc's own measure of their labels; the other figures by matplotlib's)."""
    report = request.getfixturevalue(which)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(report.as_uri(), wait_until="load")
    n = page.evaluate("document.querySelectorAll('figure.fig > svg text').length")
    direct = page.evaluate(
        "['heatmap-ras', 'heatmap-accuracy', 'family-matrix']"
        ".map(k => document.querySelectorAll(`#fig-${k} svg text`).length)"
    )
    assert n > 100 and min(direct) > 10  # the labels were measured, not absent
    outside = page.evaluate(OUTSIDE)
    assert outside == [], f"{len(outside)} labels outside their figure: {outside[:5]}"
    page.close()
