"""The report page is jinja2 templates with autoescape (issue 25): every string a user controls
(sample ids, questions, options, model names, run labels, gate reasons, notes) reaches the page
escaped exactly once, so it reads back as itself and never as markup; benchc's own SVG and
stylesheet are not escaped; a name a template lacks is an error, never an empty cell."""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import pytest

from benchc.data import save_jsonl
from benchc.data.synthetic import generate
from benchc.report import drill, page
from benchc.suite.reports import compare_runs, write_report
from benchc_tests.unit.report_runs import make_run, verdict

HOSTILE = "<script>alert(\"x&y\")</script> 'q' & <b>b</b> &amp;"


class _Page(HTMLParser):
    """The page as a browser reads it: its text nodes and attributes, references decoded."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.attrs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [v for _, v in attrs if v is not None]

    def handle_data(self, data: str) -> None:
        self.texts.append(data)


def _read(html: str) -> _Page:
    p = _Page()
    p.feed(html)
    p.close()
    return p


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path, list]:
    root = tmp_path_factory.mktemp("hostile")
    samples = [
        dataclasses.replace(
            s,
            id=f"{s.id}{HOSTILE}" if i == 0 else s.id,
            question=HOSTILE + s.question,
            options=tuple(HOSTILE + o for o in s.options),
        )
        for i, s in enumerate(generate(8, 3))
    ]
    save_jsonl(samples, root / "ds")
    runs = [
        make_run(root / "r", root / "ds", model=m + HOSTILE, seed=k) for k, m in enumerate("ab")
    ]
    vs = [
        verdict("fog-2", "ras", "fail", reason=HOSTILE, label=HOSTILE,
                movers=[[samples[0].id, 0.1, -0.4]]),
        verdict("fog-1", "ras", "unchecked", reason=HOSTILE),
    ]  # fmt: skip
    one = write_report(
        runs[0], root / "one", verdicts=vs, verdict_note=HOSTILE, n_boot=20,
        record_command="benchc record " + HOSTILE,
    )  # fmt: skip
    two = compare_runs(runs, root / "two", labels=["A" + HOSTILE, "B" + HOSTILE], n_boot=20,
                       n_permutations=99)  # fmt: skip
    return one, two, samples


def test_user_strings_are_escaped_exactly_once_in_the_report(hostile):
    one, _, samples = hostile
    html = one.read_text()
    # never markup: no injected element, and no string escaped twice (it would read "&lt;")
    assert "<script" not in html and "<b>b</b>" not in html
    assert "&amp;lt;" not in html and "&amp;amp;lt;" not in html
    read = _read(html)
    assert "script" not in read.tags and read.tags.count("b") == html.count("<b>")
    texts = read.texts
    # each reads back as itself: the question, every option, the id, the model, the gate's
    # label and reason, the verdict note and the record command
    assert samples[0].question in texts
    assert all(o in texts for o in samples[0].options)
    assert samples[0].id in texts and f"clean {samples[0].id}" in read.attrs
    assert drill.sample_anchor(samples[0].id) in read.attrs  # the card; the mover links it
    assert f"#{drill.sample_anchor(samples[0].id)}" in read.attrs
    assert HOSTILE in texts  # the gate's label and reason cells
    assert f"{samples[0].id}: 0.10 → -0.40" in "".join(texts)  # the mover
    assert "benchc record " + HOSTILE in texts
    assert any(f": a{HOSTILE} on " in t for t in texts)  # the header's run line
    assert f"fog-1: {HOSTILE}" in "".join(texts)  # the unchecked gate's reason
    # the same strings in report.json are the raw strings
    doc = json.loads((one.parent / "report.json").read_text())
    assert doc["series"][0]["model"] == "a" + HOSTILE and doc["verdicts"]["note"] == HOSTILE


def test_run_labels_are_escaped_once_in_a_comparison(hostile):
    _, two, _ = hostile
    html = two.read_text()
    assert "<script" not in html and "&amp;lt;" not in html
    texts = _read(html).texts
    assert "A" + HOSTILE in texts and "B" + HOSTILE in texts  # Table II, states, regimes
    assert f"B{HOSTILE} − A{HOSTILE}" in texts  # Table II's difference row
    assert f"A{HOSTILE} vs B{HOSTILE}" in texts  # VSI rank agreement


def test_benchc_own_svg_and_css_are_not_escaped(hostile):
    one, _, _ = hostile
    html = one.read_text()
    read = _read(html)
    assert read.tags.count("svg") >= 8  # inline, not text that shows "<svg"
    assert not any("<svg" in t for t in read.texts)
    assert re.search(r"<style>(.*?)</style>", html, re.S).group(1) == page.STYLESHEET


def test_a_missing_field_is_an_error_not_an_empty_cell(hostile):
    one, _, _ = hostile
    doc = json.loads((one.parent / "report.json").read_text())
    del doc["series"][0]["model"]
    with pytest.raises(jinja2.UndefinedError, match="model"):
        page.render(doc, {})
