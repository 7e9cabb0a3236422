"""The Hugging Face backend on the embedded tiny VLM: the same code path as any hub model."""

from __future__ import annotations

import functools
import shutil
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
import torch

from benchc.data.synthetic import make_item
from benchc.models.base import Query
from benchc.models.collate import score
from benchc.models.hf import HFBackend
from benchc.models.source import folder_hash, resolve_source, slug

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "fixtures" / "tiny-vlm"


def tiny_model_dir() -> Path:
    """The committed, trained tiny VLM (``fixtures/tiny-vlm``), loaded offline like any model."""
    assert (COMMITTED / "config.json").is_file(), f"missing committed checkpoint {COMMITTED}"
    return COMMITTED


@functools.lru_cache(maxsize=1)
def tiny_backend_cached() -> HFBackend:
    torch.set_num_threads(1)
    return HFBackend(str(tiny_model_dir()), batch_size=16)


@pytest.fixture(scope="module")
def backend() -> HFBackend:
    return tiny_backend_cached()


def synthetic_queries(n: int, seed: int = 7) -> list[Query]:
    items = [make_item(i, seed) for i in range(n)]
    return [Query(it.image, it.question, it.options, id=f"s{i}") for i, it in enumerate(items)]


@pytest.fixture(scope="module")
def queries() -> list[Query]:
    return synthetic_queries(16)


def test_forward_shapes_mass_and_padding(backend, queries) -> None:
    short = Query(queries[0].image, "Which?", ("yes", "no"), id="two")
    out = backend.forward([*queries[:3], short], distribution=True, top_k=5)
    k = [len(q.options) for q in [*queries[:3], short]]
    assert out.option_logits.shape == (4, max(k)) and out.option_logits.dtype == np.float32
    assert np.all(np.isnan(out.option_logits[3, 2:]))
    assert np.all(np.isfinite(out.option_logits[3, :2]))
    # option logits are letter log-probabilities: their exp sums to option_mass
    mass = np.nansum(np.exp(out.option_logits.astype(np.float64)), axis=1)
    np.testing.assert_allclose(out.option_mass, mass, rtol=1e-5)
    assert np.all((out.option_mass > 0) & (out.option_mass <= 1))
    # the full distribution is normalised and agrees with the letters' variants
    assert out.logprobs.shape[0] == 4 and out.logprobs.dtype == np.float32
    np.testing.assert_allclose(np.exp(out.logprobs.astype(np.float64)).sum(1), 1, atol=1e-4)
    a_ids = list(backend.letters["A"])
    np.testing.assert_allclose(
        out.option_logits[:, 0], np.log(np.exp(out.logprobs[:, a_ids]).sum(1)), atol=1e-6
    )
    # top-k is the head of the full distribution, sorted
    assert out.top_ids.dtype == np.int64 and out.top_ids.shape == (4, 5)
    np.testing.assert_array_equal(out.top_ids[:, 0], out.logprobs.argmax(1))
    assert np.all(np.diff(out.top_logprobs, axis=1) <= 0)


def test_prompt_matches_training_trained_model_answers_with_letters(backend, queries) -> None:
    """Through the backend's own prompt path the trained tiny VLM answers well above chance
    (0.25) and puts nearly all its mass on the letters: the prompt is the one it learned."""
    out = score(backend, queries)
    answers = np.array([make_item(i, 7).answer for i in range(len(queries))])
    assert np.mean(np.nanargmax(out.option_logits, 1) == answers) >= 0.6
    assert out.option_mass.min() > 0.5


def test_rerun_is_bit_identical(backend, queries) -> None:
    a = backend.forward(queries[:6])
    b = backend.forward(queries[:6])
    assert np.array_equal(a.option_logits, b.option_logits, equal_nan=True)
    assert np.array_equal(a.option_mass, b.option_mass)


def test_batch_1_vs_16_same_argmax_and_probabilities(backend, queries) -> None:
    one = score(backend, queries, batch_size=1)
    many = score(backend, queries, batch_size=16)  # lengths differ: padded rows
    p1 = _softmax(one.option_logits)
    p16 = _softmax(many.option_logits)
    np.testing.assert_array_equal(np.nanargmax(p1, 1), np.nanargmax(p16, 1))
    assert np.nanmax(np.abs(p1 - p16)) <= 1e-3


def test_unpadded_batches_move_logits_only_by_rounding(backend, queries) -> None:
    one = score(backend, queries, batch_size=1)
    grouped = score(backend, queries, batch_size=16, mix_lengths=False)
    assert np.isnan(one.option_logits).tolist() == np.isnan(grouped.option_logits).tolist()
    assert np.nanmax(np.abs(one.option_logits - grouped.option_logits)) <= 1e-5


def test_length_key_is_the_true_input_length(backend, queries) -> None:
    for q in queries[:3]:
        (n,) = backend.length_key(q)
        prompt = backend.render(backend.user_text(q))
        ids = backend._model_inputs([q.image], [prompt])["input_ids"]
        assert n == ids.shape[1]  # prompt text and the image's tokens, as the model sees them


def test_out_of_memory_halves_the_batch(backend, queries, monkeypatch) -> None:
    expected = backend.forward(queries[:4])
    real = backend._last_logits
    sizes = []
    alive_at_retry: list[list[bool]] = []
    failed: list[weakref.ref] = []

    def flaky(inputs, ready=None, **kwargs):
        n = inputs["input_ids"].shape[0]
        sizes.append(n)
        if failed:  # a retry: the failed attempt's tensors must be gone by now
            alive_at_retry.append([r() is not None for r in failed])
        if n > 1:
            # what a real OOM leaves behind: activations in the failing frame, and the inputs
            activations = torch.zeros(1 << 20)
            failed.extend([weakref.ref(activations), weakref.ref(inputs["pixel_values"])])
            raise torch.OutOfMemoryError("CUDA out of memory (simulated)")
        return real(inputs, ready, **kwargs)

    monkeypatch.setattr(backend, "_last_logits", flaky)
    try:
        out = backend.forward(queries[:4])
        assert backend.max_rows == 1
        assert sizes[:2] == [4, 2] and sizes.count(1) == 4
        assert alive_at_retry and not any(any(a) for a in alive_at_retry)
        note = " ".join(backend.notes())
        assert "CUDA out of memory at batch size 16; batches of 1 fit" in note
        assert "--batch-size 1" in note
    finally:
        backend.max_rows = None
    assert not any("out of memory" in n for n in backend.notes())
    # single rows are unpadded: they equal the padded batch within the padding tolerance
    p_split, p_whole = _softmax(out.option_logits), _softmax(expected.option_logits)
    np.testing.assert_allclose(p_split, p_whole, atol=1e-3)


def test_prepared_batches_score_as_forward(backend, queries) -> None:
    """The pipeline's split (``prepare`` in a thread, ``forward_prepared`` here) is ``forward``
    bit for bit, and a prepared batch keeps no inputs once it ran."""
    from concurrent.futures import ThreadPoolExecutor

    direct = backend.forward(queries[:5], top_k=3)
    with ThreadPoolExecutor(1) as pool:
        batch = pool.submit(backend.prepare, queries[:5]).result()
    assert batch.inputs is not None
    via = backend.forward_prepared(batch, top_k=3)
    assert batch.inputs is None
    np.testing.assert_array_equal(via.option_logits, direct.option_logits)
    np.testing.assert_array_equal(via.top_logprobs, direct.top_logprobs)


def test_nan_logits_name_the_sample(backend, queries) -> None:
    head = backend.model.lm_head.weight
    saved = head.detach().clone()
    try:
        with torch.no_grad():
            head.fill_(float("nan"))
        with pytest.raises(ValueError, match=r"NaN or infinite.*sample 's1' \(batch row 1\)"):
            backend.forward(queries[:2])
    finally:
        with torch.no_grad():
            head.copy_(saved)


def test_vision_features_mean_patch_tokens_without_cls(backend, queries) -> None:
    imgs = [q.image for q in queries[:3]]
    feats = backend.vision_features(np.stack(imgs))  # an (N, H, W, 3) array works like a list
    tower = backend.model.model.vision_tower
    pixels = backend.processor.image_processor(
        images=[backend._pil(i) for i in imgs], return_tensors="pt"
    )["pixel_values"]
    with torch.no_grad():
        hidden = tower(pixels, output_hidden_states=True).last_hidden_state
    expected = hidden[:, 1:].mean(1).numpy()
    assert feats.shape == (3, hidden.shape[-1]) and feats.dtype == np.float32
    np.testing.assert_allclose(feats, expected, rtol=1e-5, atol=1e-6)
    assert not np.allclose(feats, hidden.mean(1).numpy())  # the CLS token really is dropped


def test_fingerprint_and_name(backend) -> None:
    assert backend.fingerprint.startswith(f"hf:{tiny_model_dir().name}@sha256-")
    assert backend.fingerprint.endswith(":float32:benchc-prompt-1")
    assert backend.name == slug(tiny_model_dir().name)
    assert slug("Qwen/Qwen2.5-VL-7B-Instruct") == "qwen--qwen2.5-vl-7b-instruct"


def test_folder_hash_changes_with_any_file_but_docs(tmp_path) -> None:
    (tmp_path / "a.json").write_text("{}")
    before = folder_hash(tmp_path)
    assert folder_hash(tmp_path) == before
    (tmp_path / "README.md").write_text("# model card")  # docs do not change any output
    assert folder_hash(tmp_path) == before
    (tmp_path / "a.json").write_text("{ }")
    assert folder_hash(tmp_path) != before


def test_unknown_folder_and_uncached_hub_id_fail_fast(tmp_path, monkeypatch) -> None:
    with pytest.raises(ValueError, match="neither an existing folder nor a hub id"):
        HFBackend(str(tmp_path / "missing" / "deeper" / "x"))
    with pytest.raises(ValueError, match=r"no config\.json"):
        HFBackend(str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"'benchc-test/no-such-model'.*not in the local"):
        HFBackend("benchc-test/no-such-model")
    assert time.perf_counter() - start < 5


def test_checkpoint_without_chat_template_or_processor(tmp_path) -> None:
    src = tiny_model_dir()
    no_template = shutil.copytree(src, tmp_path / "no-template")
    (no_template / "chat_template.jinja").unlink()
    with pytest.raises(ValueError, match="has no chat template"):
        HFBackend(str(no_template))
    no_proc = shutil.copytree(src, tmp_path / "no-processor")
    (no_proc / "processor_config.json").unlink()
    with pytest.raises(ValueError, match="processor"):
        HFBackend(str(no_proc))


def test_letter_without_single_token_is_rejected(backend, queries) -> None:
    saved = dict(backend.letters)
    backend.letters["C"] = ()
    try:
        with pytest.raises(ValueError, match=r"sample 's0'.*letter\(s\) C"):
            backend.forward(queries[:1])
    finally:
        backend.letters.clear()
        backend.letters.update(saved)


def _softmax(logits: np.ndarray) -> np.ndarray:
    x = np.where(np.isnan(logits), -np.inf, logits.astype(np.float64))
    e = np.exp(x - x.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    return np.where(np.isnan(logits), np.nan, p)


def test_cached_hub_id_resolves_to_its_snapshot_commit(tmp_path, monkeypatch) -> None:
    """A hub id found in the local cache loads offline and is fingerprinted by its commit."""
    import huggingface_hub.constants as hub_constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "models--benchc-test--tiny"
    shutil.copytree(tiny_model_dir(), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(hub_constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    source = resolve_source("benchc-test/tiny")
    assert source.revision == commit and source.path.name == commit
    b = HFBackend("benchc-test/tiny")
    assert b.fingerprint == f"hf:benchc-test/tiny@{commit}:float32:benchc-prompt-1"
    assert b.name == "benchc-test--tiny"
    with pytest.raises(ValueError, match="revision v2"):
        resolve_source("benchc-test/tiny", revision="v2")


@pytest.fixture(scope="module")
def idefics3_dir(tmp_path_factory) -> Path:
    """A random SmolVLM-style Idefics3 checkpoint: a second architecture, no CLS token."""
    from transformers import AutoTokenizer, LlamaConfig
    from transformers.models.idefics3 import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3Processor,
    )
    from transformers.models.idefics3.configuration_idefics3 import Idefics3VisionConfig
    from transformers.models.idefics3.image_processing_pil_idefics3 import (
        Idefics3ImageProcessorPil,
    )

    out = tmp_path_factory.mktemp("idefics3")
    tok = AutoTokenizer.from_pretrained(tiny_model_dir())
    tok.add_special_tokens(
        {"additional_special_tokens": ["<fake_token_around_image>", "<image>", "<global-img>"]}
    )
    image_processor = Idefics3ImageProcessorPil(
        size={"longest_edge": 64}, max_image_size={"longest_edge": 64}, do_image_splitting=False
    )
    template = (tiny_model_dir() / "chat_template.jinja").read_text()
    Idefics3Processor(
        image_processor, tok, image_seq_len=4, chat_template=template
    ).save_pretrained(out)
    torch.manual_seed(0)
    vision = Idefics3VisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=64, patch_size=16,
    )  # fmt: skip
    text = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, vocab_size=len(tok), pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    config = Idefics3Config(
        vision_config=vision.to_dict(),
        text_config=text.to_dict(),
        scale_factor=2,
        image_token_id=tok.convert_tokens_to_ids("<image>"),
    )
    Idefics3ForConditionalGeneration(config).save_pretrained(out)
    return out


def test_second_architecture_idefics3(idefics3_dir, queries) -> None:
    b = HFBackend(str(idefics3_dir), batch_size=4)
    out = score(b, queries[:6])
    assert out.option_logits.shape == (6, 4) and np.all(np.isfinite(out.option_logits))
    one = score(b, queries[:6], batch_size=1)
    assert np.nanmax(np.abs(_softmax(one.option_logits) - _softmax(out.option_logits))) <= 1e-3
    imgs = [q.image for q in queries[:2]]
    feats = b.vision_features(imgs)
    pixels = b.processor.image_processor(images=[[b._pil(i)] for i in imgs], return_tensors="pt")
    with torch.no_grad():
        hidden = b.model.model.vision_model(pixels["pixel_values"][:, 0]).last_hidden_state
    np.testing.assert_allclose(feats, hidden.mean(1).numpy(), rtol=1e-5, atol=1e-6)
