"""The report's "accuracy by position of the correct option" (docs/spec.md §4, option order):
its numbers (benchc.report.position) against models whose answers are known by construction
and against a brute-force count, report.json's block, the figure and table on a run's page and
on a compare page (both sides), and a run without rotations (an old store) still rendering."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchc import spec
from benchc.data.rotations import n_rotations, rotations
from benchc.report import data, page, plots
from benchc.report.compare import restrict
from benchc.report.position import position_accuracy
from benchc.results.reader import StoredRun, order_name, read_run
from benchc.results.store import atomic_save_npz, load_npz
from benchc.suite.reports import compare_runs, write_report
from benchc_tests.unit.report_runs import make_dataset, make_run

N_BOOT = 20
FIGURE = "accuracy-by-position"
#: Cells whose rotations are stored (the suite rotates at most one cell per corruption).
ROTATED_CELLS = ("fog-2", "gaussian_noise-1")


def model_logits(
    kind: str, answers: np.ndarray, n_options: np.ndarray, offsets: np.ndarray, k_max: int,
    rng: np.random.Generator | None = None,
) -> np.ndarray:  # fmt: skip
    """(N, R, K_max) logits by position under each rotation slot (NaN beyond K and in unused
    slots): ``position`` always favours position A; ``content`` the correct option wherever it
    is shown; ``random`` is noise."""
    n, r_max = offsets.shape
    out = np.full((n, r_max, k_max), np.nan, dtype=np.float32)
    for i in range(n):
        k = int(n_options[i])
        for slot in range(r_max):
            r = int(offsets[i, slot])
            if r < 0:
                continue
            if kind == "position":
                row = [3.0 if j == 0 else 0.0 for j in range(k)]
            elif kind == "content":
                row = [3.0 if (j + r) % k == answers[i] else 0.0 for j in range(k)]
            else:
                row = rng.normal(0, 1, k).tolist()
            out[i, slot, :k] = row
    return out


def offsets_of(ids, n_options, seed: int = 0) -> np.ndarray:
    r_max = n_rotations(int(max(n_options)))
    out = np.full((len(ids), r_max), -1, dtype=np.int64)
    for i, (sid, k) in enumerate(zip(ids, n_options, strict=True)):
        plan = rotations(int(k), str(sid), seed)
        out[i, : len(plan)] = plan
    return out


def rotate(run_dir: Path, clean: str, corrupted: str, cells=ROTATED_CELLS, seed: int = 0) -> Path:
    """Give a stored run a model known by construction: the clean condition and ``cells`` are
    overwritten with ``clean`` / ``corrupted`` logits in the given order and stored under every
    other rotation (``order.<condition>``), as the suite stores them."""
    run = read_run(run_dir)
    k_max = run.clean_logits.shape[1]
    offsets = offsets_of(run.ids, run.n_options)
    rng = np.random.default_rng(seed)
    for key, kind in ((spec.CLEAN, clean), *((c, corrupted) for c in cells)):
        logits = model_logits(kind, run.answers, run.n_options, offsets, k_max, rng)
        stored = load_npz(run_dir / f"{key}.npz")
        stored["option_logits"] = logits[:, 0]
        atomic_save_npz(run_dir / f"{key}.npz", stored)
        atomic_save_npz(
            run_dir / f"{order_name(key)}.npz",
            {"option_logits": logits[:, 1:], "offsets": offsets},
        )
    return run_dir


def brute_force(run: StoredRun, keys) -> list[float]:
    """Accuracy by the correct option's position, counted pair by pair in plain Python."""
    right: dict[int, list[bool]] = {}
    for key in keys:
        given = run.clean_logits if key == spec.CLEAN else run.logits[
            :, run.corruptions.index(key.rsplit("-", 1)[0]),
            run.severities.index(int(key.rsplit("-", 1)[1]))]  # fmt: skip
        rotated, offsets = run.order[key]["option_logits"], run.order[key]["offsets"]
        for i in range(len(run.ids)):
            k, y = int(run.n_options[i]), int(run.answers[i])
            for slot, r in enumerate(offsets[i]):
                if r < 0:
                    continue
                row = given[i] if slot == 0 else rotated[i, slot - 1]
                top = int(np.argmax(np.asarray(row[:k], dtype=np.float32)))
                right.setdefault((y - r) % k, []).append((top + r) % k == y)
    return [float(np.mean(right[j])) for j in sorted(right)]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("data") / "toy", n=16)


def _run(root: Path, dataset: Path, model: str, clean: str | None, corrupted: str | None) -> Path:
    run_dir = make_run(root, dataset, model=model, vsi=False)
    return run_dir if clean is None else rotate(run_dir, clean, corrupted)


def _svg_texts(svg: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def bar_labels(doc: dict) -> list[tuple[str, str]]:
    """The drawn figure's bars as (legend label, value printed above the bar), left to right."""
    import matplotlib.pyplot as plt

    fig = plots.figures(doc, [FIGURE])["position"]
    try:
        ax = fig.axes[0]
        bars = [(c.get_label(), b) for c in ax.containers for b in c]
        texts = {round(t.get_position()[0], 6): t.get_text() for t in ax.texts}
        return [(label, texts.get(round(b.get_x() + b.get_width() / 2, 6), ""))
                for label, b in sorted(bars, key=lambda lb: lb[1].get_x())]  # fmt: skip
    finally:
        plt.close(fig)


def _figure(html: str) -> str:
    m = re.search(rf'<figure class="fig" id="fig-{FIGURE}".*?</figure>', html, re.S)
    assert m, "no accuracy-by-position figure on the page"
    return m[0]


# -- the numbers ---------------------------------------------------------------------------------
def test_a_position_model_is_right_at_a_only(tmp_path, dataset):
    run = read_run(_run(tmp_path, dataset, "pos-vlm", "position", "position"))
    b = position_accuracy(run)
    n = len(run.ids)
    assert b["positions"] == ["A", "B", "C", "D"]
    assert b["clean"] == [1.0, 0.0, 0.0, 0.0]
    assert b["corrupted"] == [1.0, 0.0, 0.0, 0.0]
    # K = 4, all 4 rotations: each sample puts its answer at each position exactly once
    assert b["n_clean"] == [n] * 4 and b["n_corrupted"] == [n * len(ROTATED_CELLS)] * 4
    assert b["corrupted_conditions"] == [c for c in run.cells if c in ROTATED_CELLS]


def test_a_content_model_is_level_and_corruption_can_turn_it_positional(tmp_path, dataset):
    run = read_run(_run(tmp_path, dataset, "mixed-vlm", "content", "position"))
    b = position_accuracy(run)
    assert b["clean"] == [1.0, 1.0, 1.0, 1.0]
    assert b["corrupted"] == [1.0, 0.0, 0.0, 0.0]
    level = position_accuracy(read_run(rotate(run.path, "content", "content")))
    assert level["clean"] == level["corrupted"] == [1.0, 1.0, 1.0, 1.0]


def test_a_random_model_matches_a_pair_by_pair_count(tmp_path, dataset):
    run = read_run(_run(tmp_path, dataset, "noise-vlm", "random", "random"))
    b = position_accuracy(run)
    assert b["clean"] == pytest.approx(brute_force(run, [spec.CLEAN]), abs=1e-12)
    assert b["corrupted"] == pytest.approx(brute_force(run, ROTATED_CELLS), abs=1e-12)
    assert 0 < np.mean(b["clean"]) < 1  # not a degenerate model


def _stored(n_options, answers, clean, order) -> StoredRun:
    n = len(n_options)
    return StoredRun(
        path=Path("mem"), manifest={}, ids=tuple(f"s{i}" for i in range(n)),
        answers=np.asarray(answers), n_options=np.asarray(n_options), corruptions=(),
        severities=(), clean_logits=clean, logits=None, order=order,
    )  # fmt: skip


def test_mixed_option_counts_unscored_rows_and_no_rotations():
    k = np.array([2, 3, 4, 4, 3])
    y = np.array([1, 0, 3, 2, 2])
    ids = [f"s{i}" for i in range(len(k))]
    offsets = offsets_of(ids, k)
    assert (offsets[0, 2:] == -1).all()  # K = 2: two rotations, the rest unused
    logits = model_logits("position", y, k, offsets, 4)
    rotated = logits[:, 1:].copy()
    rotated[4] = np.nan  # a sample whose rotations were not scored: left out, not counted wrong
    run = _stored(k, y, logits[:, 0], {"clean": {"option_logits": rotated, "offsets": offsets}})
    b = position_accuracy(run)
    assert b["positions"] == ["A", "B", "C", "D"]
    assert b["clean"] == [1.0, 0.0, 0.0, 0.0]
    assert b["n_clean"] == [4, 4, 3, 2]  # K of the four scored samples: 2, 3, 4, 4
    assert b["corrupted"] is None and b["n_corrupted"] is None
    assert b["corrupted_conditions"] == []
    json.dumps(b, allow_nan=False)  # JSON-able, no NaN
    # D is only ever shown by the 4-option samples: nobody else puts the answer there
    content = model_logits("content", y, k, offsets, 4)
    order = {"clean": {"option_logits": content[:, 1:], "offsets": offsets}}
    b = position_accuracy(_stored(k, y, content[:, 0], order))
    assert b["clean"] == [1.0, 1.0, 1.0, 1.0] and b["n_clean"] == [5, 5, 4, 2]
    # an old store: no rotations, no block
    assert position_accuracy(_stored(k, y, content[:, 0], {})) is None
    # nothing scored at all: no block either
    empty = {"clean": {"option_logits": np.full_like(rotated, np.nan), "offsets": offsets}}
    assert position_accuracy(_stored(k, y, content[:, 0], empty)) is None


def test_restricting_a_run_restricts_its_rotations(tmp_path, dataset):
    run = read_run(_run(tmp_path, dataset, "sub-vlm", "content", "position"))
    rows = np.arange(0, len(run.ids), 2)
    sub = restrict(run, rows, ["fog"], [1, 2])
    assert set(sub.order) == {spec.CLEAN, "fog-2"}
    assert all(a.shape[0] == len(rows) for arrays in sub.order.values() for a in arrays.values())
    b = position_accuracy(sub)
    assert b["corrupted_conditions"] == ["fog-2"]
    assert b["clean"] == [1.0] * 4 and b["corrupted"] == [1.0, 0.0, 0.0, 0.0]
    assert b["n_clean"] == [len(rows)] * 4


# -- report.json and the page ----------------------------------------------------------------------
def test_a_run_report_has_the_block_the_figure_and_the_table(tmp_path, dataset):
    run_dir = _run(tmp_path / "r", dataset, "pos-vlm", "content", "position")
    out = write_report(run_dir, tmp_path / "out", n_boot=N_BOOT, images=False)
    doc = json.loads((out.parent / "report.json").read_text())
    block = doc["series"][0]["accuracy_by_position"]
    assert block == position_accuracy(read_run(run_dir))
    assert block["clean"] == [1.0] * 4 and block["corrupted"] == [1.0, 0.0, 0.0, 0.0]
    assert FIGURE in doc["figures"]
    html = out.read_text()
    assert html.count('class="report-section"') == len(page.SECTIONS)
    assert '<section class="report-section" id="order">' in html
    texts = _svg_texts(_figure(html))
    assert "Accuracy by position of the correct option (option order)" in texts
    assert {"A", "B", "C", "D"} <= set(texts)
    assert bar_labels(doc) == [
        (f"current · {side}", v)
        for pos in range(4)
        for side, v in (("clean", "1.00"), ("corrupted", "1.00" if pos == 0 else "0"))
    ]
    assert "current · clean" in texts and "current · corrupted" in texts
    table = re.search(r'<table id="by-position-table">.*?</table>', html, re.S)[0]
    assert "<td>1.000</td><td>0.000</td><td>0.000</td><td>0.000</td>" in table
    assert 'id="by-position-none"' not in html


def test_a_compare_page_shows_both_sides(tmp_path, dataset):
    base = _run(tmp_path / "r", dataset, "base-vlm", "content", "content")
    cand = _run(tmp_path / "r", dataset, "cand-vlm", "content", "position")
    out = compare_runs([base, cand], tmp_path / "cmp", labels=["baseline", "candidate"],
                       images=False, n_boot=N_BOOT, n_permutations=200)  # fmt: skip
    doc = json.loads((out.parent / "report.json").read_text())
    b, c = (s["accuracy_by_position"] for s in doc["series"][:2])
    assert b["clean"] == b["corrupted"] == [1.0] * 4
    assert c["clean"] == [1.0] * 4 and c["corrupted"] == [1.0, 0.0, 0.0, 0.0]
    html = out.read_text()
    assert html.count(f'id="fig-{FIGURE}"') == 1  # one figure, both sides' bars in it
    texts = _svg_texts(_figure(html))
    for side in ("baseline", "candidate"):
        for cond in ("clean", "corrupted"):
            assert f"{side} · {cond}" in texts
    at_a = [v for _, v in bar_labels(doc)[:4]]
    assert at_a == ["1.00"] * 4
    assert bar_labels(doc)[4:8] == [
        ("baseline · clean", "1.00"), ("baseline · corrupted", "1.00"),
        ("candidate · clean", "1.00"), ("candidate · corrupted", "0"),
    ]  # fmt: skip
    rows = re.findall(r"<tr><td class=\"l\">(\w+)</td><td class=\"l\">(\w+)</td>", html)
    assert [r for r in rows if r[1] in ("clean", "corrupted")] == [
        ("baseline", "clean"), ("baseline", "corrupted"),
        ("candidate", "clean"), ("candidate", "corrupted"),
    ]  # fmt: skip


def test_the_figure_is_legible(tmp_path, dataset):
    """The figure passes the report's own layout checks (fonts, legend clear of the data)."""
    import matplotlib.pyplot as plt

    from benchc_tests.unit.test_report_figures import check_figures

    runs = [read_run(_run(tmp_path, dataset, m, "content", kind))
            for m, kind in (("base-vlm", "content"), ("cand-vlm", "position"))]  # fmt: skip
    doc = data.build(runs, n_boot=N_BOOT)
    figs = plots.figures(doc, [FIGURE])
    try:
        assert set(figs) == {"position"}
        assert check_figures(figs) == []
    finally:
        for fig in figs.values():
            plt.close(fig)


def test_a_run_without_rotations_still_renders(tmp_path, dataset):
    old = make_run(tmp_path / "r", dataset, model="old-vlm", vsi=False)
    assert read_run(old).order == {}
    out = write_report(old, tmp_path / "out", n_boot=N_BOOT, images=False)
    doc = json.loads((out.parent / "report.json").read_text())
    assert doc["series"][0]["accuracy_by_position"] is None
    assert FIGURE not in doc["figures"]
    html = out.read_text()
    assert f'id="fig-{FIGURE}"' not in html and 'id="by-position-none"' in html
    assert html.count('class="report-section"') == len(page.SECTIONS)
    # beside a run that has rotations: the figure draws that one, the page names the other
    new = _run(tmp_path / "r", dataset, "new-vlm", "content", "position")
    out = compare_runs([old, new], tmp_path / "cmp", labels=["old", "new"], images=False,
                       n_boot=N_BOOT, n_permutations=200)  # fmt: skip
    html = out.read_text()
    texts = _svg_texts(_figure(html))
    assert "new · clean" in texts and not any(t.startswith("old ·") for t in texts)
    assert "not available for: old (no rotated option orders stored)" in html


def test_a_run_with_only_clean_rotated_draws_clean_only(tmp_path, dataset):
    run = read_run(_run(tmp_path, dataset, "cut-vlm", "content", "position"))
    cut = replace(run, order={k: v for k, v in run.order.items() if k == spec.CLEAN})
    doc = data.build([cut], n_boot=N_BOOT)
    b = doc["series"][0]["accuracy_by_position"]
    assert b["clean"] == [1.0] * 4 and b["corrupted"] is None
    svg = plots.render_all(doc, [FIGURE])[FIGURE]
    assert "current · clean" in _svg_texts(svg)
    assert not any("corrupted" in t for t in _svg_texts(svg))


def test_a_baseline_of_snapshots_draws_its_side_from_the_recorded_rotations():
    """The committed baseline's model-level option-order snapshots carry the rotations: a
    report against it draws the baseline's accuracy by position too, not only the candidate's."""
    from benchc.report.baseline import evidence_run, read_folder

    folder = Path(__file__).resolve().parents[2] / "thresholds" / "tiny-vlm"
    run = evidence_run(read_folder(folder))
    assert run is not None and set(run.order) >= {"clean", "fog-3", "pixelate-3"}
    block = position_accuracy(run)
    assert block is not None and block["positions"] == ["A", "B", "C", "D"]
    assert len(block["corrupted_conditions"]) == 19 and sum(block["n_clean"]) == 115 * 4
