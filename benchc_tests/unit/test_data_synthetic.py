"""The synthetic generator: determinism, balance, option sanity, regions and labels."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from benchc.data import synthetic as syn


def test_same_seed_same_bytes_and_prefix_stable():
    a = syn.generate(24, seed=3)
    b = syn.generate(24, seed=3)
    assert [s.image_bytes for s in a] == [s.image_bytes for s in b]
    assert [(s.question, s.options, s.answer) for s in a] == [
        (s.question, s.options, s.answer) for s in b
    ]
    prefix = syn.generate(6, seed=3)
    assert [s.image_bytes for s in prefix] == [s.image_bytes for s in a[:6]]


def test_different_seed_differs():
    a = syn.generate(12, seed=0)
    b = syn.generate(12, seed=1)
    assert sum(x.image_bytes != y.image_bytes for x, y in zip(a, b, strict=True)) >= 10


def test_letters_balanced_per_kind_and_options_valid():
    samples = syn.generate(4 * len(syn.KINDS) * 2, seed=0)
    for kind in syn.KINDS:
        answers = [s.answer for s in samples if s.category == kind]
        assert np.bincount(answers, minlength=4).tolist() == [2, 2, 2, 2], kind
    for s in samples:
        assert s.k == 4 and len(set(s.options)) == 4
        assert s.meta["source"] == "synthetic"
        assert all(o in syn.ANSWER_VOCAB for o in s.options)


@pytest.mark.parametrize("size", [128, 224])
def test_images_and_regions(size):
    for s in syn.generate(12, seed=5, size=size):
        img = Image.open(io.BytesIO(s.image_bytes))
        assert img.size == (size, size) and img.mode == "RGB"
        x0, y0, x1, y1 = s.region
        assert 0 <= x0 < x1 <= size and 0 <= y0 < y1 <= size
        assert all(type(v) is int for v in s.region)  # JSON-serialisable
        # the region holds ink: something differs from the plain background there
        arr = np.asarray(img)[y0:y1, x0:x1]
        assert (arr != np.array(syn.BACKGROUND, np.uint8)).any()


def test_answers_match_labels():
    arr = syn.generate_arrays(60, seed=2)
    for i in range(60):
        kind = syn.KINDS[arr.kind[i]]
        correct = arr.options[i][arr.answer[i]]
        assert syn.ANSWER_VOCAB[arr.option_ids[i, arr.answer[i]]] == correct
        if kind == "count":
            assert int(correct) == arr.count[i] == (arr.cell_shape[i] > 0).sum()
        elif kind == "chart":
            assert int(correct) == arr.value[i]
        elif kind in ("colour", "size"):
            assert correct == syn.COLOURS[arr.value[i]]
            assert (arr.cell_colour[i] == syn.COLOURS.index(correct) + 1).sum() == 1
        elif kind == "position":
            assert correct == syn.POSITIONS[arr.value[i]]
        if kind in ("text", "chart"):
            assert not arr.cell_shape[i].any()


def test_position_answer_is_where_the_region_is():
    for s in syn.generate(36, seed=9, kinds=("position",)):
        x0, y0, x1, y1 = s.region
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        want = ("top" if cy < 64 else "bottom") + " " + ("left" if cx < 64 else "right")
        assert s.options[s.answer] == want


def test_arrays_match_png_pixels():
    arr = syn.generate_arrays(6, seed=4)
    samples = syn.generate(6, seed=4)
    for i, s in enumerate(samples):
        assert np.array_equal(np.asarray(s.image()), arr.images[i])


def test_bad_arguments():
    with pytest.raises(ValueError, match="size"):
        syn.generate(2, seed=0, size=16)
    with pytest.raises(ValueError, match="kinds"):
        syn.generate(2, seed=0, kinds=("nope",))
    with pytest.raises(ValueError, match="n must be"):
        syn.generate(-1, seed=0)
