"""The report's numbers a user must be able to trust (issue 24), in headless Chromium, on a
small grid with a small VSI set (4 cells, 18 samples, the baseline's low-VSI pool empty) and on
the 95-cell grid: the VSI support table agrees with the gate and Table 2; figure titles clear
their panel titles; the RAS colour scale is centred on 0; an undrawable Fig. 2 is a note; the
95-cell heatmap's labels are readable; a card a VSI gate picked shows the sample's VSI baseline
-> current; the movers are a list. Screenshots go to the test's tmp dir."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchc import spec
from benchc.report.fmt import moved
from benchc.suite.reports import write_report
from benchc_tests.browser.test_report_browser import browser  # noqa: F401 (fixture)
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline

pytestmark = pytest.mark.browser

#: Figures whose title sits above panel titles of their own.
TITLED = {
    "heatmap-ras": "RAS by corruption and severity",
    "severity": "Severity trajectories per family (Bench-C Fig. 7)",
    "plane": "RAS component plane by correctness state (Bench-C Fig. 5)",
}


def _report(root: Path, corruptions, n: int, shift_vsi: bool) -> Path:
    ds = make_dataset(root / "ds", n=n, seed=3)
    kw = dict(corruptions=tuple(corruptions), severities=(1, 2) if n < 20 else (1, 2, 3, 4, 5))
    rng = np.random.default_rng(5)
    # the baseline: less sensitive (its low-VSI pool empty); the candidate turned insensitive
    base = make_run(root / "results", ds, vsi_scale=4.0 if shift_vsi else 1.0, **kw)
    scale = np.where(rng.random(n) < 0.8, 1e-3, 1.0) if shift_vsi else 1.0
    cur = make_run(root / "results", ds, damp=0.5, fingerprint="cur", vsi_scale=scale, **kw)
    record_baseline(base, root / "thresholds")
    return write_report(cur, root / "out", thresholds_dir=root / "thresholds", n_boot=50)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("small"), ("fog", "gaussian_noise"), 18, True)


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> Path:
    return _report(tmp_path_factory.mktemp("full"), spec.CORRUPTIONS, 24, False)


def _open(browser, report: Path):  # noqa: F811
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(report.as_uri(), wait_until="load")
    assert errors == []
    return page


def _overlaps(a: dict, b: dict) -> bool:
    return not (a["x"] + a["width"] <= b["x"] or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"] or b["y"] + b["height"] <= a["y"])  # fmt: skip


@pytest.mark.parametrize("which", ["small", "full"])
def test_figure_titles_clear_their_panels_and_ras_is_centred(browser, which, request, tmp_path):  # noqa: F811
    report = request.getfixturevalue(which)
    page = _open(browser, report)
    for key, title in TITLED.items():
        texts = page.locator(f"#fig-{key} svg text")
        boxes = [(texts.nth(i).text_content() or "", texts.nth(i).bounding_box())
                 for i in range(texts.count())]  # fmt: skip
        (head,) = [b for t, b in boxes if t.strip() == title]
        others = [(t, b) for t, b in boxes if t.strip() != title and b]
        clash = [t for t, b in others if _overlaps(head, b)]
        assert clash == [], (key, clash)
        # every other text lies below the title
        assert all(b["y"] >= head["y"] + head["height"] - 1 for _, b in others), key
    # the RAS colour bar: symmetric about 0 (0 is the scale's white midpoint)
    ticks = [t.strip().replace("−", "-") for t in page.locator("#fig-heatmap-ras svg text")
             .all_text_contents()]  # fmt: skip
    nums = sorted({float(t) for t in ticks if re.fullmatch(r"-?\d\.\d", t)})  # the colour bar
    assert "0.0" in ticks and nums and nums[0] == -nums[-1], nums
    page.screenshot(path=str(tmp_path / f"{which}.png"), full_page=True)
    page.close()


def test_small_grid_vsi_numbers_agree_and_fig2_is_a_note(browser, small):  # noqa: F811
    doc = json.loads((small.parent / "report.json").read_text())
    v = doc["series"][0]["vsi"]
    gated = next(r for r in v["variants"].values() if r["gated"])
    assert v["gap"]["gap"] is None and gated["gap"] is None  # the gate's gap: n/a on both
    gate = next(r for r in doc["verdicts"]["items"] if r.get("figure") == "gap")
    assert gate["current"] is None
    page = _open(browser, small)
    row = page.locator("#vsi-supports tr", has_text="gated")
    assert "n/a" in row.inner_text() and "reference's" in row.inner_text()
    assert "n/a" in page.locator("#vsi-table2 tr").nth(1).inner_text()
    # Fig. 2 has no probe accuracy anywhere: a note in its place, no empty plot
    fig2 = page.locator("#fig-vsi-gap")
    assert fig2.locator("svg").count() == 0
    assert "not drawn" in fig2.locator(".fig-note").inner_text()
    page.close()


def test_vsi_gate_cards_show_the_sample_vsi_and_movers_are_a_list(browser, small, tmp_path):  # noqa: F811
    doc = json.loads((small.parent / "report.json").read_text())
    failed = next(r for r in doc["verdicts"]["items"]
                  if r.get("figure") == "insensitive_fraction")  # fmt: skip
    assert failed["status"] == "fail" and failed["movers"]
    picked = [d for d in doc["drilldown"] if (d.get("gate") or {}).get("level") == "vsi"]
    assert picked
    page = _open(browser, small)
    for d in picked:
        text = page.locator(f"#sample-{d['id']} .card-vsi").inner_text()
        assert f"baseline {d['vsi']['baseline']:.4f} → current {d['vsi']['current']:.4f}" in text
        assert d["vsi"]["baseline"] >= spec.VSI_INSENSITIVE > d["vsi"]["current"]
    row = page.locator("#verdict-table tr.fail").first
    items = row.locator("ul.movers li")
    assert items.count() == min(3, len(failed["movers"]))
    sid, b, c = failed["movers"][0]
    assert items.first.inner_text() == f"{sid}: {moved(b, c)}"  # the id links its card
    assert items.first.locator("a.mover").get_attribute("href") == f"#sample-{sid}"
    page.locator(f"#sample-{picked[0]['id']}").screenshot(path=str(tmp_path / "card.png"))
    page.close()


def test_95_cell_heatmap_labels_are_readable(browser, full):  # noqa: F811
    page = _open(browser, full)
    heights = page.evaluate(
        "() => [...document.querySelectorAll('#fig-heatmap-ras svg text')]"
        ".filter(t => /^[-+]?\\d\\.\\d\\d/.test(t.textContent.trim()))"
        ".map(t => t.getBoundingClientRect().height"
        " / Math.max(1, t.textContent.split('\\n').length))"
    )
    assert len(heights) >= 2 * 95
    assert min(heights) >= 9, f"cell labels {min(heights):.1f} px high"
    page.close()
