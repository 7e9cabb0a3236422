"""The tiny-VLM build script: the miniature config builds, trains a few steps, reloads offline
through the Auto classes and is byte-reproducible on rerun."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from benchc.spec import format_question
from benchc.tinyvlm.build import MINIATURE, build_untrained, letter_token_ids
from benchc.tinyvlm.train import TRAIN_MINIATURE, build_trained, canonical_order


def _digest(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("mini") / "ckpt"
    return build_trained(out, seed=0, config=MINIATURE, log=lambda _msg: None)


def test_trained_build_is_byte_reproducible_and_differs_from_untrained(
    trained: Path, tmp_path: Path
) -> None:
    again = build_trained(tmp_path / "again", seed=0, config=MINIATURE, log=lambda _m: None)
    assert _digest(again) == _digest(trained)
    untrained = build_untrained(tmp_path / "untrained", seed=0, config=MINIATURE)
    # same tokenizer and processor, different (trained) weights
    assert _digest(untrained)["tokenizer.json"] == _digest(trained)["tokenizer.json"]
    assert _digest(untrained)["model.safetensors"] != _digest(trained)["model.safetensors"]


def test_trained_build_reloads_offline_through_auto_classes(trained: Path) -> None:
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(trained, backend="pil")
    model = AutoModelForImageTextToText.from_pretrained(trained)
    names = set(model.state_dict())
    assert not any("heads" in n or "aux" in n for n in names)  # training heads are not saved
    msgs = [
        {
            "role": "user",
            "content": [
                {"type": "image"},
                {"type": "text", "text": format_question("Which?", ["x", "y", "z", "w"])},
            ],
        }
    ]
    text = proc.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>assistant\n")
    rng = np.random.default_rng(0)
    img = Image.fromarray(rng.integers(0, 256, (50, 70, 3), dtype=np.uint8))
    batch = proc(images=[img], text=[text], return_tensors="pt")
    n_img = int((batch["input_ids"] == model.config.image_token_id).sum())
    assert n_img == MINIATURE.image_seq_length
    with torch.no_grad():
        logits = model(**batch).logits[0, -1]
    assert torch.isfinite(logits).all()
    ids = letter_token_ids(proc.tokenizer)
    assert all(len(v) == 2 for v in ids)  # "A" and " A" are single tokens for every letter


def test_fixed_order_curriculum_keeps_the_answer_content() -> None:
    from benchc.data import synthetic

    arr = synthetic.generate_arrays(12, 3, 64)
    options, answers = canonical_order(arr)
    for i in range(12):
        assert sorted(options[i]) == sorted(arr.options[i])
        assert options[i][answers[i]] == arr.options[i][arr.answer[i]]
    assert TRAIN_MINIATURE.steps <= 8  # CI builds stay fast


def test_fast_training_inputs_are_bit_identical_to_the_processor(trained: Path) -> None:
    """Training skips the processor's overhead; it must still see exactly what the backend sends."""
    from transformers import AutoProcessor

    from benchc.data import synthetic
    from benchc.tinyvlm.train import _pils, fast_inputs, prompt_text

    proc = AutoProcessor.from_pretrained(trained, backend="pil")
    for size in (64, 100):  # 100 px needs the bicubic resize, 64 px too (miniature input is 32)
        arr = synthetic.generate_arrays(6, 1, size)
        texts = [prompt_text(proc, q, o) for q, o in zip(arr.questions, arr.options, strict=True)]
        ref = proc(images=_pils(arr.images), text=texts, return_tensors="pt", padding=True)
        fast = fast_inputs(proc, MINIATURE, arr.images, texts)
        assert torch.equal(ref["input_ids"], fast["input_ids"])
        assert torch.equal(ref["attention_mask"], fast["attention_mask"])
        assert torch.equal(ref["pixel_values"], fast["pixel_values"])
