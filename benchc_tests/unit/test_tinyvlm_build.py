"""The tiny-VLM build script: miniature config builds, reloads offline and is byte-reproducible."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch

from benchc.spec import format_question
from benchc.tinyvlm.build import MINIATURE, build_untrained, letter_token_ids


def _digest(d: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.iterdir())}


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> Path:
    torch.set_num_threads(1)
    return build_untrained(tmp_path_factory.mktemp("mini") / "ckpt", seed=0, config=MINIATURE)


def test_untrained_build_is_byte_reproducible(mini: Path, tmp_path: Path) -> None:
    again = build_untrained(tmp_path / "again", seed=0, config=MINIATURE)
    assert _digest(again) == _digest(mini)
    other = build_untrained(tmp_path / "other", seed=1, config=MINIATURE)
    assert _digest(other)["model.safetensors"] != _digest(mini)["model.safetensors"]


def test_untrained_build_reloads_offline_through_auto_classes(mini: Path) -> None:
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    proc = AutoProcessor.from_pretrained(mini, backend="pil")
    model = AutoModelForImageTextToText.from_pretrained(mini)
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
    assert all(len(v) == 2 for v in ids[:4])  # "A" and " A" are both single tokens
