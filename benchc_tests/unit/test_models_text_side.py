"""Per-sample text tensors: batches composed from them equal the whole processor's, bit for bit,
and a processor they would not equal switches them off."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from benchc.models.hf import HFBackend
from benchc.models.text_side import TextSide

from .test_models_hf import tiny_model_dir


def photos(n: int) -> list[np.ndarray]:
    """Mixed image shapes, so rows need padding when the image tokens depend on shape."""
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, (40 + 7 * (i % 4), 64, 3), dtype=np.uint8) for i in range(n)]


def test_composed_batches_equal_the_processors_and_score_the_same() -> None:
    torch.set_num_threads(1)
    backend = HFBackend(str(tiny_model_dir()), batch_size=4, image_size=64)
    images = photos(12)
    prompts = [backend.render(f"Which one? {'more words ' * (i % 5)}") for i in range(12)]
    whole = [backend._model_inputs(images[i : i + 4], prompts[i : i + 4]) for i in (0, 4, 8)]
    side = backend._text_side()
    assert side.enabled and len(side) == 12  # recorded from the batches the processor made
    calls = []
    real = backend.processor.__call__
    backend.processor = _Counting(backend.processor, calls)
    backend._text_sides = (backend.processor, side)
    again = [backend._model_inputs(images[i : i + 4], prompts[i : i + 4]) for i in (0, 4, 8)]
    assert len(calls) <= 2  # only the two checks (a plain and a padded batch) ran it whole
    assert side._checked_plain and side._checked_padded
    for got, expected in zip(again, whole, strict=True):
        assert sorted(got) == sorted(expected)
        for key, tensor in expected.items():
            assert torch.equal(got[key], tensor), key
    # rows in another order and company: still the processor's tensors
    order = [9, 2, 5, 0]
    mixed = backend._model_inputs([images[i] for i in order], [prompts[i] for i in order])
    reference = real(
        images=[[backend._pil(images[i])] for i in order],
        text=[prompts[i] for i in order],
        padding=True,
        return_tensors="pt",
        add_special_tokens=backend._add_special(prompts),
    )
    for key, tensor in reference.items():
        assert torch.equal(mixed[key], tensor), key


class _Counting:
    """A processor that counts its whole-batch calls."""

    def __init__(self, processor, calls: list) -> None:
        self._processor, self._calls = processor, calls

    def __call__(self, *args, **kwargs):
        self._calls.append(1)
        return self._processor(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._processor, name)


def _rows(ids: list[list[int]], image: int) -> dict[str, torch.Tensor]:
    width = max(map(len, ids))
    batch = torch.zeros((len(ids), width), dtype=torch.long)
    mask = torch.zeros_like(batch)
    for i, row in enumerate(ids):
        batch[i, width - len(row) :] = torch.tensor(row)
        mask[i, width - len(row) :] = 1
    return {
        "input_ids": batch,
        "attention_mask": mask,
        "pixel_values": torch.full((len(ids), 2), float(image)),
    }


def test_a_processor_whose_text_depends_on_the_pixels_switches_composing_off() -> None:
    side = TextSide(pad_id=0, side="left")
    side.image_keys = frozenset({"pixel_values"})
    keys = [("p", 8, 8), ("q", 8, 8)]
    side.record(keys, _rows([[5, 6], [7, 8, 9]], image=1))
    assert len(side) == 2
    # the whole processor now gives other tokens for the same prompts and shapes
    other = _rows([[5, 6, 6], [7, 8, 9]], image=2)
    got = side.compose(keys, lambda: {"pixel_values": other["pixel_values"]}, lambda: other)
    assert got is other  # the processor's own output, never the composed one
    assert not side.enabled and len(side) == 0
    assert side.compose(keys, lambda: {}, lambda: other) is None  # the caller runs it whole


def test_text_outputs_that_are_not_per_token_switch_composing_off() -> None:
    side = TextSide(pad_id=0, side="left")
    side.image_keys = frozenset({"pixel_values"})
    full = _rows([[5, 6]], image=1)
    full["cross_attention_mask"] = torch.ones((1, 2, 1, 4))  # (batch, length, images, tiles)
    side.record([("p", 8, 8)], full)
    assert not side.enabled


def test_no_pad_token_means_no_composing() -> None:
    assert not TextSide(pad_id=None, side="left").enabled


def test_kept_rows_stay_within_their_budget_least_recently_used_first() -> None:
    one_row = 2 * 3 * 8  # input_ids and attention_mask, 3 int64 tokens
    side = TextSide(pad_id=0, side="left", budget=2 * one_row)
    side.image_keys = frozenset({"pixel_values"})
    for name in ("a", "b"):
        side.record([(name, 8, 8)], _rows([[1, 2, 3]], image=1))
    assert len(side) == 2 and side.bytes == 2 * one_row
    side._checked_plain = True  # (the check against the whole processor is tested above)
    # "a" used again, then a third prompt: "b" (the least recently used) is dropped
    got = side.compose([("a", 8, 8)], lambda: {"pixel_values": torch.ones(1, 2)}, lambda: None)
    assert got is not None and got["input_ids"].tolist() == [[1, 2, 3]]
    side.record([("c", 8, 8)], _rows([[4, 5, 6]], image=1))
    assert len(side) == 2 and side.bytes == 2 * one_row
    never = lambda: pytest.fail("not kept")  # noqa: E731
    assert side.compose([("b", 8, 8)], never, never) is None
    assert side.compose([("a", 8, 8)], lambda: {}, never) is not None
