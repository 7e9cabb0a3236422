"""``benchc compare``'s cross-run agreement: VSI rank agreement matched by sample id, Bench-C
Table VI and Table V, each checked against scipy / sklearn / numpy computed here, and the
compare page showing them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import jaccard_score

from benchc import spec
from benchc.metrics import compute_grid
from benchc.metrics.signals import spearman_permutation
from benchc.metrics.stats import bootstrap_indices
from benchc.report import agreement, data
from benchc.report import page as page_module
from benchc.results.reader import read_run
from benchc.suite.reports import compare_runs
from benchc_tests.unit.report_runs import make_dataset, make_run, make_sampling_run

#: Fewer shuffles than the paper's 10^5 keep these fast; the command uses the paper's.
N_PERM = 999
N_BOOT = 200
HF = "hf:toy-vlm@sha256-1:float32:benchc-prompt-1"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A white-box run, its sampling proxy over 18 of its samples in reverse order, another
    model on a reordered subset of the same samples, and one on other samples entirely."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    tmp = tmp_path_factory.mktemp("agree")
    ds = make_dataset(tmp / "toy")
    sub = tmp / "sub"
    save_jsonl(list(reversed(generate(24, 3)))[:20], sub)  # 20 shared ids, other order
    res = tmp / "results"
    white = make_run(res, ds, fingerprint=HF)
    return {
        "white": white,
        "sampling": make_sampling_run(res, white, rows=np.arange(23, 5, -1)),
        "other": make_run(res, sub, model="other", seed=1, damp=0.3),
        "elsewhere": make_run(res, make_dataset(tmp / "far", n=10, seed=9), model="far"),
    }


def _vsi_by_id(run) -> dict[str, float]:
    return dict(zip(run.vsi_ids or run.ids, run.vsi["vsi_top50"].tolist(), strict=True))


def test_vsi_rank_agreement_matches_scipy_on_shared_ids(runs):
    a, b = read_run(runs["white"]), read_run(runs["other"])
    got = agreement.vsi_agreement([a, b], ["A", "B"], n_resamples=N_PERM, n_boot=N_BOOT)
    assert got["permutation_seed"] == 42 and got["bootstrap_seed"] == 42
    assert got["support"] == "top50"  # the VSI the gates read
    (pair,) = got["pairs"]
    va, vb = _vsi_by_id(a), _vsi_by_id(b)
    shared = [sid for sid in a.ids if sid in vb]
    x, y = np.array([va[s] for s in shared]), np.array([vb[s] for s in shared])
    assert pair["n_shared"] == len(shared) == 20
    assert pair["rho"] == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    # by position instead of by id the numbers would differ
    assert pair["rho"] != pytest.approx(stats.spearmanr(x, b.vsi["vsi"]).statistic, abs=1e-6)
    ref = stats.permutation_test(
        (x,),
        lambda u: stats.spearmanr(u, y).statistic,
        permutation_type="pairings",
        n_resamples=N_PERM,
        rng=np.random.default_rng(0),
    )
    assert pair["p_value"] == pytest.approx(ref.pvalue, abs=0.05)
    assert pair["p_value"] == spearman_permutation(x, y, N_PERM, seed=42, batch=1000).p_value
    reps = [stats.spearmanr(x[i], y[i]).statistic for i in bootstrap_indices(20, N_BOOT, 42)]
    assert pair["ci"] == pytest.approx(list(np.percentile(reps, [2.5, 97.5])), abs=1e-12)
    low_x, low_y = x < spec.VSI_INSENSITIVE, y < spec.VSI_INSENSITIVE
    assert pair["n_low_a"] == low_x.sum() and pair["n_low_b"] == low_y.sum()
    assert pair["jaccard_low"] == pytest.approx(jaccard_score(low_x, low_y), abs=1e-12)


def test_too_few_shared_ids_say_why(runs):
    a, far = read_run(runs["white"]), read_run(runs["elsewhere"])
    (pair,) = agreement.vsi_agreement([a, far], ["A", "F"], n_resamples=N_PERM)["pairs"]
    assert pair["n_shared"] == 0 and pair["rho"] is None and pair["ci"] is None
    assert "at least 3" in pair["note"]
    none = agreement.vsi_agreement([a, read_run(runs["sampling"])], ["A", "S"])
    assert none["pairs"] == [] and "1 of the compared runs have VSI" in none["note"]


def test_table_vi_is_the_ranks_of_the_model_figures(runs):
    names = ["white", "other", "elsewhere", "sampling"]
    rs = [read_run(runs[n]) for n in names]
    t = agreement.table_vi(rs, names)
    assert t["available"] and t["metrics"] == ["accuracy", "d_acc", "relative_robustness", "ras"]
    scores = np.array([[r.grid.figure(m) for m in t["metrics"]] for r in rs])
    ranks = np.column_stack([stats.rankdata(-scores[:, j], method="min") for j in range(4)])
    order = np.argsort(ranks[:, 3], kind="stable")
    assert t["models"] == [names[i] for i in order]
    assert np.allclose(t["scores"], scores[order], atol=1e-12)
    assert t["ranks"] == ranks[order].astype(int).tolist()
    assert t["shift"] == (ranks[order][:, [3]] - ranks[order]).astype(int).tolist()
    assert "differ" in t["note"]  # three datasets: said, not hidden
    one = agreement.table_vi(rs[:1], ["white"])
    assert not one["available"] and "ranking needs two" in one["note"]


def test_option_access_reads_the_fingerprint():
    assert agreement.option_access({"model_fingerprint": HF}) == "logits"
    lp = "openai:m@http://h/v1:n20:t1.0:p:c:q:seed0:lp20"
    assert agreement.option_access({"model_fingerprint": lp}) == "logprobs"
    assert agreement.option_access({"model_fingerprint": lp[: -len(":lp20")]}) == "sampling"
    assert agreement.option_access({"model_fingerprint": "mypkg:Model-1"}) is None
    assert agreement.option_access({}) is None
    # what the run recorded after scoring wins: a log-prob server that served none was sampled
    recorded = {"model_fingerprint": lp, "option_access": "sampling"}
    assert agreement.option_access(recorded) == "sampling"


def test_table_v_logit_vs_sampling_on_shared_samples(runs):
    names = ["white", "other", "sampling"]
    rs = [read_run(runs[n]) for n in names]
    t = agreement.table_v(rs, names)
    assert t["available"]
    (pair,) = t["pairs"]  # 'other' is another model: not paired
    assert (pair["logit"], pair["sampling"]) == ("white", "sampling")
    assert pair["logit_access"] == "logits"
    white, samp = rs[0], rs[2]
    shared = [sid for sid in white.ids if sid in samp.ids]
    iw = np.array([white.ids.index(s) for s in shared])
    isam = np.array([samp.ids.index(s) for s in shared])
    assert pair["n_shared"] == 18 and list(iw) == list(range(6, 24))
    rows = {}
    for key, run, idx in (("logit_row", white, iw), ("sampling_row", samp, isam)):
        k = run.n_options[idx]
        ans = run.answers[idx]
        mask = np.arange(run.clean_logits.shape[1]) < k[:, None]
        top_clean = np.argmax(np.where(mask, run.clean_logits[idx], -np.inf), axis=1)
        top = np.argmax(np.where(mask[:, None, None], run.logits[idx], -np.inf), axis=-1)
        acc = np.mean(top_clean == ans)
        d_acc = np.mean(top == ans[:, None, None]) - acc
        g = compute_grid(run.clean_logits[idx], run.logits[idx], ans, k)
        row = pair[key]
        assert row["samples"] == "18×2×2"
        assert row["acc_clean"] == pytest.approx(acc, abs=1e-12)
        assert row["d_acc"] == pytest.approx(d_acc, abs=1e-12)
        assert row["ras"] == pytest.approx(float(np.nanmean(g.ras)), abs=1e-9)
        rows[key] = (top_clean, g)
    for fig in ("acc_clean", "d_acc", "ras"):
        want = pair["sampling_row"][fig] - pair["logit_row"][fig]
        assert pair["difference"][fig] == pytest.approx(want, abs=1e-12)
    (tw, gw), (ts, gs) = rows["logit_row"], rows["sampling_row"]
    assert pair["top1_agreement"] == pytest.approx(np.mean(tw == ts), abs=1e-12)
    rho = stats.spearmanr(gw.cell("ras").ravel(), gs.cell("ras").ravel()).statistic
    assert pair["cell_ras_rho"] == pytest.approx(rho, abs=1e-12)


def test_same_model_reads_a_path_or_hub_id_by_its_last_component():
    assert agreement.same_model("tiny-vlm", "work--main--fixtures--tiny-vlm")
    assert agreement.same_model("Qwen--Qwen2.5-VL-3B-Instruct", "Qwen--Qwen2.5-VL-3B-Instruct")
    assert not agreement.same_model("tiny-vlm", "work--other-vlm")


def test_table_v_without_a_pairing_says_so(runs, tmp_path):
    rs = [read_run(runs["white"]), read_run(runs["other"])]
    t = agreement.table_v(rs, ["white", "other"])
    assert not t["available"] and t["pairs"] == []
    assert "no logit run and sampling run of the same model" in t["note"]
    assert "white: logits" in t["note"] and "other: unknown" in t["note"]
    stranger = make_sampling_run(tmp_path, runs["white"], model="someone-else")
    t = agreement.table_v([rs[0], read_run(stranger)], ["white", "stranger"])
    assert not t["available"]


def test_compare_page_shows_the_agreement_and_report_pages_do_not(runs, tmp_path):
    dirs = [runs["white"], runs["other"], runs["sampling"]]
    compare_runs(dirs, tmp_path / "cmp", images=False, n_boot=20, n_permutations=N_PERM)
    doc = json.loads((tmp_path / "cmp" / "report.json").read_text())
    a = doc["agreement"]
    labels = [s["label"] for s in doc["series"]]
    assert a["vsi"]["n_permutations"] == N_PERM and len(a["vsi"]["pairs"]) == 1
    assert a["table_vi"]["available"] and sorted(a["table_vi"]["models"]) == sorted(labels)
    assert a["table_v"]["pairs"][0]["sampling"] == labels[2]
    page = (tmp_path / "cmp" / "report.html").read_text()
    assert '<section class="report-section" id="agreement">' in page
    for tid in ('id="vsi-agreement"', 'id="table6"', 'class="table5"', 'href="#agreement"'):
        assert tid in page
    rho = a["vsi"]["pairs"][0]["rho"]
    assert f"{rho:+.3f}" in page
    one = data.build([read_run(runs["white"])], n_boot=20)  # a report page: no agreement
    assert "agreement" not in one and 'id="agreement"' not in page_module.render(one, {})


def test_the_command_defaults_are_the_papers():
    assert agreement.PERMUTATION_RESAMPLES == 100_000 and agreement.PERMUTATION_SEED == 42
    assert agreement.BOOTSTRAP_RESAMPLES == 1000 and agreement.BOOTSTRAP_SEED == 42
