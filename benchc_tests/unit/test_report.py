"""The report: its numbers equal benchc.metrics, its baseline overlay equals the snapshots,
verdict order, the written files (size, determinism, schema), the CLI and the CI outputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from benchc import spec
from benchc.gates import Figure, Payload
from benchc.metrics import (
    encoder_llm_gap,
    insensitive_fraction,
)
from benchc.metrics.figures import reported_cells, table2_figures
from benchc.report import ci, data, page, plots
from benchc.report.baseline import read_snapshots
from benchc.results.reader import find_runs, read_run
from benchc.suite.reports import compare_runs, write_report
from benchc_tests.unit.report_runs import make_dataset, make_run, verdict

N_BOOT = 50  # SE machinery is tested in test_metrics_stats; keep these fast


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("data") / "toy")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, dataset) -> Path:
    return make_run(tmp_path_factory.mktemp("results"), dataset)


@pytest.fixture(scope="module")
def doc(run_dir) -> dict:
    return data.build([read_run(run_dir)], n_boot=N_BOOT)


def close(a, b) -> bool:
    if a is None or b is None:
        return a is None and (b is None or not np.isfinite(b))
    return bool(np.isclose(a, b, rtol=0, atol=1e-12))


def test_table2_is_the_grid(run_dir, doc):
    g = read_run(run_dir).grid
    ses = g.standard_errors(N_BOOT, 0)
    t2 = doc["series"][0]["table2"]
    for f in table2_figures():
        assert close(t2[f.key]["value"], g.figure(f.name)), f.key
        assert close(t2[f.key]["se"], float(ses[f.name])), f.key
    assert t2["d_s"]["se"] > 0 and t2["d_c"]["se"] > 0


def test_cells_families_and_tables_are_the_grid(run_dir, doc):
    run = read_run(run_dir)
    g, s = run.grid, doc["series"][0]
    for f in reported_cells():
        for i, c in enumerate(g.corruptions):
            for j, sev in enumerate(run.severities):
                assert close(s["cells"][f.name][f"{c}-{sev}"], g.cell(f.name)[i, j])
    # Fig. 7: the family mean over its corruptions at each severity
    fog = g.corruptions.index("fog")
    assert s["families"]["r_c"]["weather"] == [
        pytest.approx(g.cell("r_c")[fog, j]) for j in range(2)
    ]
    # Table III
    att = g.states("ras")
    assert s["states"]["count"] == att.count.tolist()
    assert np.allclose(s["states"]["ras"], att.mean)
    assert np.allclose(s["states"]["d_s"], g.states("d_s").mean)
    assert np.allclose(s["states"]["cond_rate"], att.alpha)
    assert close(s["states"]["r_c"], g.figure("r_c")) and close(s["states"]["r_w"], g.figure("r_w"))
    # Table IV
    t4 = g.regimes()
    assert s["regimes"]["count"] == t4.count.tolist()
    assert np.allclose(np.asarray(s["regimes"]["mean_ras"], float), t4.mean_ras, equal_nan=True)
    # Fig. 6
    tr = g.trajectories()
    assert s["trajectories"]["count"] == tr.count.tolist()
    assert np.allclose(np.asarray(s["trajectories"]["ras"], float), tr.ras, equal_nan=True)


def test_component_plane_is_the_pairs(run_dir, doc):
    g = read_run(run_dir).grid
    plane = doc["series"][0]["plane"]["states"]
    att = g.states("ras")
    for k, state in enumerate(("cc", "cw", "wc", "ww")):
        st = plane[state]
        assert st["n"] == att.count[k] == int(np.sum(st["density"]))
        assert close(st["mean_ras"], att.mean[k])
        assert close(st["mean_d_c"], g.states("d_c").mean[k])


def test_vsi_block_is_the_vsi_metrics(run_dir, doc):
    run = read_run(run_dir)
    a = run.vsi
    v = doc["series"][0]["vsi"]
    assert v["support"] == "top50" and v["variants"]["top50"]["gated"]
    assert close(v["insensitive_fraction"], insensitive_fraction(a["vsi_top50"]))
    gap = encoder_llm_gap(
        a["vsi_top50"], a["features_clean"], a["features_blur"], a["top1_clean"], a["top1_blur"]
    )
    assert close(v["gap"]["gap"], gap.gap) and close(v["gap"]["change_low"], gap.change_rate)
    assert v["gap"]["n_low"] == gap.n and v["gap"]["pool"] == "own"
    assert close(v["gap"]["probe_low"], gap.probe_accuracy)
    assert close(v["gap"]["probe_low_std"], gap.probe.fold_std)
    assert close(v["gap"]["probe_high"], gap.control_probe.accuracy)
    assert close(v["gap"]["change_high"], gap.control_change_rate)
    # Table 2 adds up: probe - change = gap
    assert v["gap"]["probe_low"] - v["gap"]["change_low"] == pytest.approx(v["gap"]["gap"])
    assert v["values"] == [pytest.approx(x, abs=1e-6) for x in a["vsi_top50"]]


def test_vsi_table3_is_sklearn_on_the_vsi_pass_answers(run_dir, doc):
    """Table 3 recomputed from the stored arrays with scikit-learn and numpy directly."""
    from scipy.stats import zscore
    from sklearn.metrics import roc_auc_score

    run = read_run(run_dir)
    a = run.vsi
    t3 = doc["series"][0]["vsi"]["signals"]
    x = a["option_logits"].astype(np.float64)
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    correct = p.argmax(axis=1) == run.vsi_answers
    conf = p.max(axis=1)
    risks = {
        "max_prob": -conf,
        "vsi_region": -a["vsi_top50"],
        "vsi_whole": -a["vsi_whole_top50"],
        "hybrid": zscore(-a["vsi_top50"]) + zscore(-a["vsi_whole_top50"]),
    }
    assert t3["n"] == len(correct) and close(t3["accuracy"], correct.mean())
    for key, risk in risks.items():
        row = t3["signals"][key]
        assert row["auroc"] == pytest.approx(roc_auc_score(~correct, risk), abs=1e-12)
        lo, hi = row["auroc_ci"]
        assert lo < row["auroc"] < hi
        assert row["prr80"] is not None and row["prr80_ci"][0] < row["prr80_ci"][1]
    assert t3["best"] == max(risks, key=lambda k: t3["signals"][k]["auroc"])
    bins = np.minimum((conf * 10).astype(int), 9)
    ece = sum(abs(correct[bins == b].sum() - conf[bins == b].sum()) for b in range(10)) / len(conf)
    assert t3["ece"] == pytest.approx(ece) and t3["brier"] == pytest.approx(
        np.mean((conf - correct) ** 2)
    )
    assert t3["reliability"]["count"] == np.bincount(bins, minlength=10).tolist()


def _svg_texts(svg: str) -> list[str]:
    return [t.strip() for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg)]


def test_heatmap_draws_the_cell_values(doc):
    svg = plots.heatmap(doc, "ras", "RAS")
    texts = " ".join(_svg_texts(svg))
    for key, value in doc["series"][0]["cells"]["ras"].items():
        assert plots.cell_text(value) in texts, key
    traj = " ".join(_svg_texts(plots.trajectory_composition(doc)))
    t = doc["series"][0]["trajectories"]
    for share, r in zip(t["share"], t["ras"], strict=True):
        if share and share > 0.06:
            assert plots.cell_text(r, signed=True) in traj


def _snapshot(folder: Path, scope: str, figs: dict[str, float], **info) -> None:
    """A format-2 snapshot JSON without evidence (what a reviewer could hand-write)."""
    level, _, name = scope.rpartition(":")
    p = Payload(
        scope="model" if level == "model" else "vsi" if level == "vsi" else name,
        level=level or "cell",  # type: ignore[arg-type]
        model="toy-vlm",
        dataset="toy",
        n=24,
        figures={k: Figure(v, 0.01) for k, v in figs.items()},
        rules=[],
        info=info,
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{scope.replace(':', '-')}.json").write_text(p.to_json())


def test_baseline_overlay_comes_from_the_snapshots(tmp_path, run_dir):
    folder = tmp_path / "thresholds" / "toy-vlm"
    _snapshot(folder, "fog-1", {"ras": -0.25, "accuracy": 0.5, "r_c": -0.3}, d_s=0.1)
    _snapshot(folder, "model:ras", {"ras": -0.2}, acc_clean=0.7, acc_corrupt=0.6)
    _snapshot(folder, "vsi:gap", {"gap": 0.4}, probe_accuracy=0.7, argmax_change_rate=0.3)
    (folder / "broken.json").write_text("{")
    base = read_snapshots(tmp_path / "thresholds", "toy-vlm")
    assert base.problems and "broken.json" in base.problems[0]
    doc = data.build([read_run(run_dir)], baseline=base, n_boot=N_BOOT)
    b = doc["series"][1]
    assert b["kind"] == "baseline"
    assert b["cells"]["ras"] == {"fog-1": -0.25} and b["cells"]["d_s"] == {"fog-1": 0.1}
    assert b["table2"]["ras"] == {"value": -0.2, "se": 0.01}
    assert b["table2"]["d_acc"]["value"] == pytest.approx(-0.1)
    assert b["vsi"]["gap"]["gap"] == 0.4 and b["vsi"]["gap"]["change_low"] == 0.3
    assert b["states"] is None  # per-pair arrays are not in the JSON: no invented baseline
    svg = plots.heatmap(doc, "ras", "RAS")
    assert "baseline" in _svg_texts(svg)  # its own panel, and the change under each value
    fog1 = doc["series"][0]["cells"]["ras"]["fog-1"]
    assert plots.cell_text(fog1 + 0.25, signed=True) in " ".join(_svg_texts(svg))


def test_verdicts_failures_first_with_anchors():
    vs = [
        verdict("fog-1", "ras", "pass"),
        verdict("fog-2", "ras", "fail"),
        verdict("model", "r_w", "improved"),
        verdict("fog-2", "accuracy", "fail", change=-0.5),
    ]
    block = data.verdicts_block(vs, None, "pytest --snapshot-update")
    assert [v["status"] for v in block["items"]] == ["fail", "fail", "improved", "pass"]
    assert block["items"][0]["figure"] == "accuracy"  # furthest past its tolerance first
    anchors = [v["anchor"] for v in block["items"]]
    assert len(set(anchors)) == 4 and all(re.fullmatch(r"[\w-]+", a) for a in anchors)
    assert block["counts"] == {"pass": 1, "fail": 2, "improved": 1}
    assert data.cell_status(block) == {"fog-1": "pass", "fog-2": "fail"}
    assert data.verdicts_block(None, None, None)["note"] == "no gate verdicts available"


def test_write_report_files(tmp_path, run_dir):
    vs = [verdict("fog-2", "ras", "fail", movers=[["syn3-00004", 0.1, -0.4]]),
          verdict("fog-1", "ras", "pass")]  # fmt: skip
    out = write_report(run_dir, tmp_path / "a", verdicts=vs, n_boot=N_BOOT)
    html = out.read_text()
    assert out.name == "report.html" and out.stat().st_size < 5_000_000
    assert 'href="#gate-fog-2-ras"' in html and 'id="gate-fog-2-ras"' in html
    assert html.index("gate-fog-2-ras") < html.index('id="table2"')  # verdict first
    assert html.count('class="report-section"') == len(page.SECTIONS)
    drawn = sorted(set(plots.PLOTS) - {"accuracy-by-position"})  # the toy run has no rotations
    assert html.count('<figure class="fig"') == len(drawn)
    assert not re.search(r"""(src|href)=["']?(https?:)?//|url\(\s*["']?https?:|<script""", html)
    assert html.count("<img ") == 3 * data.DRILL_SAMPLES  # clean, corrupted, blurred
    doc = json.loads((tmp_path / "a" / "report.json").read_text())
    assert doc["schema"] == data.SCHEMA and doc["figures"] == drawn
    assert doc["drilldown"][0]["id"] == "syn3-00004"  # the failing gate's mover first
    assert "thumbnails" not in doc["drilldown"][0]
    # determinism: the same run gives byte-identical files
    again = write_report(run_dir, tmp_path / "b", verdicts=vs, n_boot=N_BOOT)
    assert again.read_bytes() == out.read_bytes()
    assert (tmp_path / "b" / "report.json").read_bytes() == (
        tmp_path / "a" / "report.json"
    ).read_bytes()


def test_offline_report_without_gate_code_says_so(tmp_path, run_dir):
    out = write_report(
        run_dir, tmp_path / "r", thresholds_dir=tmp_path / "none", n_boot=N_BOOT, images=False
    )
    doc = json.loads((out.parent / "report.json").read_text())
    try:
        import benchc.suite.verdicts  # noqa: F401
    except ImportError:
        assert doc["verdicts"]["available"] is False
        assert doc["verdicts"]["note"].startswith("no gate verdicts available")
        assert "no gate verdicts available" in out.read_text()


@pytest.mark.slow  # two pages written through the CLI (~6 s)
def test_cli_report_and_compare(tmp_path, dataset, run_dir):
    from benchc.cli import main

    worse = make_run(tmp_path / "results", dataset, model="toy-vlm", seed=1, damp=1.0)
    assert main(["report", str(run_dir), "--out", str(tmp_path / "rep"), "--no-images"]) == 0
    assert (tmp_path / "rep" / "report.html").is_file()
    argv = ["compare", str(run_dir), str(worse), "--out", str(tmp_path / "cmp")]
    assert main([*argv, "--labels", "base,worse"]) == 0
    doc = json.loads((tmp_path / "cmp" / "report.json").read_text())
    assert doc["mode"] == "compare" and [s["label"] for s in doc["series"]] == ["base", "worse"]
    w = read_run(worse).grid
    assert close(doc["series"][1]["table2"]["ras"]["value"], w.figure("ras"))
    assert doc["drilldown"][0]["why"].startswith("largest drop")
    with pytest.raises(SystemExit):
        main(["compare", str(run_dir), "--out", str(tmp_path / "x")])


def test_compare_runs_needs_two(tmp_path, run_dir):
    with pytest.raises(ValueError, match="two runs"):
        compare_runs([run_dir], tmp_path)


def test_ci_properties_and_step_summary(tmp_path):
    class Node:
        def __init__(self) -> None:
            self.user_properties: list = []

    v = verdict("fog-2", "ras", "fail", mdr=float("nan"))
    node = Node()
    ci.record(node, v)
    props = dict(node.user_properties)
    assert props["benchc.ras.status"] == "fail"
    assert props["benchc.ras.change"] == -0.2 and props["benchc.ras.tolerance"] == 0.05
    assert props["benchc.ras.mdr"] == ""
    assert json.loads(props["benchc.ras.verdict"])["scope"] == "fog-2"
    md = ci.step_summary([v, verdict("fog-1", "ras", "pass")], report="out/report.html")
    assert "2 gates: 1 fail, 1 pass" in md
    assert "FAIL: 1 gate(s) failed" in md
    assert "| fail | RAS | fog-2 | -0.1000 | -0.3000 | -0.2000 |" in md
    assert "fog-1" not in md  # passes are counted, not listed
    target = tmp_path / "summary.md"
    assert ci.write_step_summary([v], environ={}) is None
    ci.write_step_summary([v], environ={ci.SUMMARY_ENV: str(target)})
    ci.write_step_summary([v], environ={ci.SUMMARY_ENV: str(target)})
    assert target.read_text().count("## benchc robustness gates") == 2  # appended


def test_reader_partial_grid_and_errors(tmp_path, dataset):
    run = make_run(tmp_path, dataset, severities=(1, 2))
    (run / "fog-2.npz").unlink()  # fog lost a severity: the complete grid is noise only
    r = read_run(run)
    assert r.corruptions == ("gaussian_noise",) and r.severities == (1, 2)
    assert r.grid.shape == (24, 1, 2) and find_runs(tmp_path) == [run]
    with pytest.raises(FileNotFoundError, match="not a benchc results folder"):
        read_run(tmp_path)
    from benchc.results import atomic_save_npz

    atomic_save_npz(run / "fog-1.npz", {"option_logits": np.zeros((3, 4), np.float32)})
    (run / "fog-2.npz").write_bytes((run / "fog-1.npz").read_bytes())
    with pytest.raises(Exception, match=r"fog-1.npz has 3 rows"):
        read_run(run)
    assert spec.CLEAN == "clean"


def test_baseline_run_comes_from_the_snapshot_evidence(tmp_path, dataset):
    """The per-sample evidence the paired gates recorded (the option logits of every
    condition) gives the baseline every figure, per-pair ones included."""
    from benchc.gates import GridEvidence, sidecar

    results = tmp_path / "results"
    base = read_run(make_run(results, dataset, seed=0))
    worse = make_run(results, dataset, seed=0, damp=1.0)
    keys = [spec.condition_key(c, s) for c in base.grid.corruptions for s in base.severities]
    cube = base.logits.reshape(len(base.ids), len(keys), -1)
    ev = GridEvidence.from_conditions(
        base.ids, base.answers, base.n_options, base.clean_logits,
        {k: cube[:, i] for i, k in enumerate(keys)},
    )  # fmt: skip
    folder = tmp_path / "thresholds" / "toy-vlm"
    rel = sidecar.save(folder, ev)
    p = Payload("model", "model", "toy-vlm", "toy", len(base.ids),
                {"ras": Figure(ev.figures()["ras"])}, [], {}, ev)  # fmt: skip
    (folder / "test_model-ras.json").write_text(p.to_json(evidence_file=rel))
    out = write_report(worse, tmp_path / "r", thresholds_dir=tmp_path / "thresholds", n_boot=N_BOOT)
    doc = json.loads((out.parent / "report.json").read_text())
    b = doc["series"][1]
    assert b["kind"] == "baseline"
    assert b["states"]["count"] == base.grid.states("ras").count.tolist()
    assert b["trajectories"] is not None and b["plane"] is not None
    assert doc["drilldown"][0]["why"].startswith("largest drop in mean RAS vs the baseline: ")
    assert doc["drilldown"][0]["baseline_mean_ras"] is not None


def test_cli_damaged_run_is_one_clear_line(tmp_path, capsys):
    from benchc.cli import main

    run = tmp_path / "m" / "x"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text("{}")
    (run / "samples.npz").write_bytes(b"not an npz")
    assert (
        main(["report", str(tmp_path), "--out", str(tmp_path / "o")]) == 8
    )  # EXIT_UNREADABLE (the infrastructure code)
    err = capsys.readouterr().err
    assert "cannot read this results folder" in err and "Traceback" not in err


def test_grid_run_and_separate_vsi_run_are_one_report(tmp_path, dataset):
    """With its own VSI dataset a session stores two run folders of one model: one page,
    the VSI figures from the VSI run, the error signals on the samples both share."""
    from benchc.cli import main
    from benchc.results.reader import group_runs

    results = tmp_path / "results"
    grid = make_run(results, dataset)  # with VSI arrays of its own from an earlier session
    vsi_set = make_dataset(tmp_path / "vsi-set", n=30, seed=5)
    vsi = make_run(results, vsi_set, corruptions=())
    other = make_run(results, dataset, seed=9, vsi=False)  # another model: a report of its own
    groups = group_runs(find_runs(results))
    assert (grid, vsi) in groups and (other, None) in groups and len(groups) == 2
    assert main(["report", str(results), "--out", str(tmp_path / "o"), "--no-images"]) == 0
    doc = json.loads((tmp_path / "o" / f"toy-vlm-{grid.name}" / "report.json").read_text())
    v = doc["series"][0]["vsi"]
    # the VSI set's own clean option answers score its error signals (no shared samples needed)
    assert v["n"] == 30 and v["signals"]["n"] == 30
    assert len(list((tmp_path / "o").iterdir())) == 2


def test_unchecked_gates_are_named_in_the_verdict():
    from benchc.report import page

    vb = data.verdicts_block(
        [verdict("fog-1", "ras", "unchecked", reason="no snapshot")], None, None
    )
    html = page._verdict({"verdicts": vb})
    assert "1 gate(s) could not be checked" in html and "fog-1: no snapshot" in html


def test_family_matrix_draws_the_family_means(doc):
    texts = " ".join(_svg_texts(plots.family_matrix(doc)))
    for fam, row in doc["series"][0]["families"]["r_c"].items():
        for v in row:
            assert plots.cell_text(v, signed=True) in texts, fam


def test_offline_verdicts_check_the_separate_vsi_run_too(tmp_path, dataset):
    """``benchc report RESULTS --baseline DIR`` re-checks the VSI gates from the session's VSI
    run folder, under the same false-alarm budget as the grid's gates."""
    from benchc.suite.verdicts import collect

    results = tmp_path / "results"
    grid = make_run(results, dataset, vsi=False)
    vsi = make_run(results, make_dataset(tmp_path / "vsi-set", n=30, seed=5), corruptions=())
    records = collect(grid, tmp_path / "thresholds", vsi_dir=vsi)
    by_case = {r["case"] for r in records}
    assert "test_vsi[gap]" in by_case and "test_vsi[insensitive_fraction]" in by_case
    assert any(c.startswith("test_cell[") for c in by_case)
    assert all(r["status"] == "unchecked" for r in records)  # no snapshots recorded here
    assert "test_vsi[gap]" not in {r["case"] for r in collect(grid, tmp_path / "thresholds")}


# -- Fig. 7's R_w matrix, drill-down cells, displayed paths -------------------------------------
def _clean_wrong(run) -> np.ndarray:
    """Clean-wrong samples straight from the stored clean logits (argmax over each sample's own
    options), not from the grid's bookkeeping."""
    return np.array(
        [
            int(np.argmax(run.clean_logits[i, : int(k)])) != int(a)
            for i, (a, k) in enumerate(zip(run.answers, run.n_options, strict=True))
        ]
    )


def _figure_group_texts(html: str, figure: str, gid: str) -> list[str]:
    """The texts inside SVG group ``gid`` of the page's figure ``figure``."""
    import xml.etree.ElementTree as ET

    start = html.index(f'id="fig-{figure}"')
    svg = html[html.index("<svg", start) : html.index("</svg>", start) + len("</svg>")]
    root = ET.fromstring(svg)
    (group,) = [g for g in root.iter("{http://www.w3.org/2000/svg}g") if g.get("id") == gid]
    return ["".join(t.itertext()).strip() for t in group.iter("{http://www.w3.org/2000/svg}text")]


def test_r_w_matrix_beside_r_c_is_the_clean_wrong_pairs(tmp_path, run_dir):
    """Bench-C Fig. 7: R_w (mean RAS over the clean-wrong pairs) per family and severity, in
    report.json and drawn in its own panel beside R_c."""
    run = read_run(run_dir)
    wrong = _clean_wrong(run)
    assert 0 < wrong.sum() < len(wrong)  # both sides exist in this run
    ras = run.grid.ras  # per pair, checked against a per-pair reference in test_metrics_grid
    want: dict[str, list[float]] = {}
    for fam, members in spec.FAMILIES.items():
        idx = [d for d, c in enumerate(run.corruptions) if c in members]
        if idx:
            want[fam] = [
                float(np.mean([ras[wrong, d, j].mean() for d in idx]))
                for j in range(len(run.severities))
            ]
    out = write_report(run_dir, tmp_path / "r", n_boot=N_BOOT, images=False)
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    got = doc["series"][0]["families"]["r_w"]
    assert set(got) == set(want) == {"weather", "noise"}
    for fam, row in want.items():
        assert got[fam] == [pytest.approx(v, abs=1e-9) for v in row], fam
    assert got != doc["series"][0]["families"]["r_c"]
    html = out.read_text()
    rw = _figure_group_texts(html, "family-matrix", "family-r_w-0")
    rc = _figure_group_texts(html, "family-matrix", "family-r_c-0")
    assert "R_w (clean-wrong)" in " ".join(rw) and "R_c (clean-correct)" in " ".join(rc)
    for row in want.values():
        for v in row:
            assert f"{v:+.2f}" in rw
    for row in doc["series"][0]["families"]["r_c"].values():
        for v in row:
            assert f"{v:+.2f}" in rc


def _card(html: str, sid: str) -> str:
    start = html.index(f'<div class="card" id="sample-{sid}"')
    end = html.find('<div class="card"', start + 1)
    return html[start : end if end > 0 else html.index("</section>", start)]


def _thumb_pixels(card: str) -> np.ndarray:
    import base64
    import io

    from PIL import Image

    src = re.search(r'<img class="thumb-corrupted"[^>]* src="data:image/png;base64,([^"]+)"', card)
    return np.asarray(Image.open(io.BytesIO(base64.b64decode(src.group(1)))).convert("RGB"))


def _scored_thumbs(run, dataset, sid: str, cells: list[str]) -> dict[str, np.ndarray]:
    """Thumbnails of the images the suite scored for ``sid`` in ``cells``: the corruption
    pipeline's own output (what the model saw), shrunk as any thumbnail."""
    from PIL import Image

    from benchc.corruptions import materialize
    from benchc.data import load_dataset

    (sample,) = [s for s in load_dataset(dataset) if s.id == sid]
    images = materialize([(sid, sample.image())], cells, image_size=None, seed=run.seed)
    out = {}
    for cell in cells:
        im = Image.fromarray(images[(sid, cell)])
        im.thumbnail((120, 120))
        out[cell] = np.asarray(im.convert("RGB"))
    return out


def test_drilldown_card_shows_the_cell_of_its_gate(tmp_path, dataset, run_dir):
    """A card picked by a failing cell gate shows that cell's corrupted image (not the sample's
    worst cell); by a family gate, the sample's worst cell within the family; a card tied to no
    gate keeps the worst cell over the grid; each says which."""
    run = read_run(run_dir)
    g, cells = run.grid, run.cells
    ras = {
        sid: dict(zip(cells, g.ras[i].reshape(-1), strict=True)) for i, sid in enumerate(run.ids)
    }
    worst = {sid: min(r, key=r.get) for sid, r in ras.items()}
    # a cell gate on a cell that is not its mover's worst; a family gate on a family that
    # does not hold its mover's worst cell over the grid
    cell_sid = run.ids[4]
    gate_cell = next(c for c in cells if c != worst[cell_sid] and c.startswith("fog"))
    fam_sid = next(s for s in run.ids[5:] if worst[s].startswith("gaussian_noise"))
    fam_cells = [c for c in cells if c.startswith("fog")]
    fam_want = min(fam_cells, key=ras[fam_sid].get)
    vs = [
        verdict(gate_cell, "ras", "fail", movers=[[cell_sid, 0.1, -0.4]]),
        verdict("weather", "r_c", "fail", level="family", movers=[[fam_sid, 0.1, -0.4]]),
    ]
    out = write_report(run_dir, tmp_path / "r", verdicts=vs, n_boot=N_BOOT)
    html = out.read_text()
    doc = json.loads((tmp_path / "r" / "report.json").read_text())
    by_id = {it["id"]: it for it in doc["drilldown"]}

    # the cell gate's card: that cell's image, numbers and label
    card = _card(html, cell_sid)
    assert f'data-cell="{gate_cell}" data-cell-basis="gate"' in card
    thumbs = _scored_thumbs(run, dataset, cell_sid, [gate_cell, worst[cell_sid]])
    assert not np.array_equal(thumbs[gate_cell], thumbs[worst[cell_sid]])
    assert np.array_equal(_thumb_pixels(card), thumbs[gate_cell])
    it = by_id[cell_sid]
    assert (it["cell"], it["cell_basis"], it["worst_cell"]) == (gate_cell, "gate", worst[cell_sid])
    assert it["gate"]["anchor"] == f"gate-{gate_cell}-ras"
    assert f'href="#gate-{gate_cell}-ras"' in card  # the card links its gate's row
    assert it["cell_note"] == f"image: the cell of gate RAS {gate_cell} (fail)"
    i, (d, j) = run.ids.index(cell_sid), divmod(cells.index(gate_cell), len(run.severities))
    assert close(it["ras_cell"], g.ras[i, d, j])
    k = int(g.n_options[i])
    assert it["p_corrupted"] == [pytest.approx(x) for x in g.p_corrupt[i, d, j, :k]]
    assert f"RAS in {gate_cell}: {g.ras[i, d, j]:+.3f}" in card

    # the family gate's card: the sample's worst cell among the family's cells, named as such
    card = _card(html, fam_sid)
    assert f'data-cell="{fam_want}" data-cell-basis="gate"' in card
    thumbs = _scored_thumbs(run, dataset, fam_sid, [fam_want])
    assert np.array_equal(_thumb_pixels(card), thumbs[fam_want])
    assert "worst cell in family weather" in by_id[fam_sid]["cell_note"]
    assert by_id[fam_sid]["worst_cell"] != fam_want

    # a card tied to no gate: the worst cell over the grid, labelled so
    rest = [it for it in doc["drilldown"] if it["id"] not in (cell_sid, fam_sid)]
    assert rest
    for it in rest:
        assert it["cell_basis"] == "worst" and it["cell"] == it["worst_cell"] == worst[it["id"]]
        assert it["gate"] is None and "not tied to a cell gate" in it["cell_note"]
        assert f'data-cell="{it["cell"]}" data-cell-basis="worst"' in _card(html, it["id"])


def test_model_and_vsi_gate_cards(run_dir):
    """A model gate's card: the sample's worst cell over every cell (its scope); a VSI gate
    names no cell, so its card falls back to the grid's worst and says why."""
    from benchc.report import drill

    run = read_run(run_dir)
    cells = run.cells
    assert drill.gate_cells(run, verdict("model", "ras", "fail")) == cells
    assert drill.gate_cells(run, verdict("noise", "ras", "fail", level="family")) == [
        "gaussian_noise-1",
        "gaussian_noise-2",
    ]
    assert drill.gate_cells(run, verdict("fog-3", "ras", "fail")) == []  # not in this grid
    assert drill.gate_cells(run, verdict("vsi", "gap", "fail", level="vsi")) == []
    assert drill.gate_cells(run, None) == []
    i = 2
    worst = cells[int(np.nanargmin(run.grid.ras[i].reshape(-1)))]
    cell, basis, note = drill.shown_cell(run, i, verdict("model", "ras", "fail"))
    assert (cell, basis) == (worst, "gate") and "the model's grid" in note
    cell, basis, note = drill.shown_cell(run, i, verdict("vsi", "gap", "fail", level="vsi"))
    assert (cell, basis) == (worst, "worst") and "names no cell" in note


def test_display_path_is_relative_inside_the_working_directory(tmp_path, monkeypatch):
    from benchc.fsutil import display_path

    (tmp_path / "proj" / "a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "proj")
    monkeypatch.chdir(tmp_path / "proj")
    assert display_path(tmp_path / "proj" / "a" / "b") == "a/b"
    assert display_path(tmp_path / "proj") == "."
    assert display_path("a/./b") == "a/b"
    assert display_path(tmp_path / "elsewhere") == str(tmp_path / "elsewhere")
    assert display_path("../elsewhere/x") == str(tmp_path / "elsewhere" / "x")  # absolute
    assert display_path(tmp_path / "link" / "a") == "a"  # the same folder through a link
    assert display_path(tmp_path / "proj" / "a", cwd=tmp_path) == "proj/a"


def test_report_paths_are_relative_to_the_working_directory(tmp_path, monkeypatch, dataset):
    """Header and report.json show a folder inside the working directory relative to it (no
    home or CI runner path), one outside it absolute."""
    proj = tmp_path / "proj"
    run = make_run(proj / ".benchc" / "results", dataset)
    (proj / "thresholds" / "toy-vlm").mkdir(parents=True)  # empty: no readable snapshots
    rel = run.relative_to(proj).as_posix()
    assert rel.startswith(".benchc/results/toy-vlm/")
    monkeypatch.chdir(proj)
    out = write_report(
        run, proj / "rep", thresholds_dir=proj / "thresholds", n_boot=N_BOOT, images=False
    )
    doc = json.loads((proj / "rep" / "report.json").read_text())
    assert doc["series"][0]["source"] == rel
    assert doc["baseline_note"] == "no readable snapshots in thresholds/toy-vlm"
    assert doc["verdicts"]["note"] == "gates checked against baseline toy-vlm (thresholds/toy-vlm)"
    header = out.read_text().split("</header>")[0]
    assert f'from <span class="source">{rel}</span>' in header
    assert "thresholds/toy-vlm" in header and str(tmp_path) not in header
    assert str(tmp_path) not in json.dumps(doc)

    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    write_report(run, proj / "rep2", n_boot=N_BOOT, images=False)
    doc = json.loads((proj / "rep2" / "report.json").read_text())
    assert doc["series"][0]["source"] == str(run)


def test_a_run_stored_before_the_whole_image_pass_still_reports_its_vsi(tmp_path, dataset):
    from benchc.results.store import atomic_save_npz, load_npz

    run_dir = make_run(tmp_path / "results", dataset)
    arrays = load_npz(run_dir / "vsi-aligned.npz")
    (run_dir / "vsi-aligned.npz").unlink()
    legacy = {k: v for k, v in arrays.items() if "whole" not in k and k != "option_logits"}
    atomic_save_npz(run_dir / "vsi-region-blur.npz", legacy)
    v = data.build([read_run(run_dir)], n_boot=20)["series"][0]["vsi"]
    assert v["n"] == len(legacy["vsi"]) and v["gap"]["n_low"] > 0
    assert [r["variant"] for r in v["table1"]] == ["region blur"] and v["signals"] is None
    assert any("whole-image VSI" in m for m in v["missing"])
    assert any("error signals" in m for m in v["missing"])


def test_the_report_gates_the_support_the_run_gated(run_dir, tmp_path):
    from benchc.suite.reports import write_report

    page = write_report(run_dir, tmp_path / "full", vsi_support="full", n_boot=20, images=False)
    v = json.loads((page.parent / "report.json").read_text())["series"][0]["vsi"]
    assert v["support"] == "full" and v["variants"]["full"]["gated"]
    assert not v["variants"]["top50"]["gated"] and v["variant"] == "vsi"


# -- issue 24: numbers a user can trust ----------------------------------------------------------
def test_signed_heatmaps_are_centred_on_zero():
    series = [{"cells": {"ras": {"fog-1": -0.55, "fog-2": 0.12}}}, {"cells": {"ras": {"a": None}}}]
    assert plots.heat_limits("ras", series) == (-0.6, 0.6)
    assert plots.heat_limits("r_w", [{"cells": {"r_w": {"x": 0.01}}}]) == (-0.2, 0.2)
    assert plots.heat_limits("accuracy", series) == (0.0, 1.0)


def test_fig2_without_a_probe_is_a_note_not_an_empty_plot():
    gap = {k: None for k in ("probe_low", "probe_high", "gap", "probe_low_std")}
    s = {"label": "current", "kind": "run",
         "vsi": {"gap": {**gap, "change_low": 0.0, "change_high": 0.5, "n_low": 3},
                 "missing": []}}  # fmt: skip
    out = plots.vsi_gap({"series": [s]})
    assert "<svg" not in out and "not drawn" in out and "3 samples in the low-VSI pool" in out


def test_gate_row_movers_are_a_list_and_the_mdr_note_is_shown():
    from benchc.report import page

    v = verdict("fog-2", "ras", "fail", movers=[["s1", 0.1, -0.4], ["s2", 0.2, -0.1]])
    v["anchor"], v["note"] = "gate-fog-2-ras", "tolerance 0.2 exceeds the MDR 0.1: both ways"
    row = page._verdict_row(v)
    assert '<ul class="movers"><li>s1: 0.10 → -0.40</li><li>s2: 0.20 → -0.10</li></ul>' in row
    assert '<p class="mdr-note">tolerance 0.2 exceeds the MDR 0.1: both ways</p>' in row
