"""corrupt(): the 19 x 5 matrix at awkward sizes, seeding, RNG hygiene, conversions and errors."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from benchc.corruptions import corrupt, corrupt_array, derive_seed
from benchc.data.images import prepare
from benchc.spec import CORRUPTIONS, SEVERITIES


def scene(h: int, w: int) -> np.ndarray:
    """A deterministic gradient with a red block: structure every corruption visibly changes."""
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack(
        [x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), (x + y) * 255 // (h + w)], axis=-1
    ).astype(np.uint8)
    img[h // 4 : h // 2, w // 4 : w // 2] = (200, 30, 40)
    return img


# (height, width): square minimum, odd non-square, landscape 300x200 and the real-model size.
SIZES = [(32, 32), (33, 47), (200, 300), (448, 448)]


@pytest.mark.parametrize("name", CORRUPTIONS)
@pytest.mark.parametrize("shape", SIZES, ids=lambda s: f"{s[1]}x{s[0]}")
def test_every_severity_runs_and_changes_pixels(shape, name):
    img = scene(*shape)
    outputs = []
    for severity in SEVERITIES:
        out = corrupt(img, name, severity, seed=0, sample_id="m")
        assert out.shape == img.shape and out.dtype == np.uint8
        assert out.flags.c_contiguous
        assert not np.array_equal(out, img), f"{name}-{severity} left {shape} unchanged"
        outputs.append(out)
    # Severity is an actual parameter: the five levels are not all one image.
    assert len({o.tobytes() for o in outputs}) > 1
    assert np.array_equal(img, scene(*shape)), "the caller's array was modified"


def test_resizes_before_corrupting_keeping_aspect():
    img = scene(100, 250)
    out = corrupt(img, "gaussian_noise", 3, seed=0, sample_id="r", image_size=128)
    assert out.shape == (51, 128, 3)
    # Same pixels as corrupting the prepared image directly: resizing happens first.
    prepared = prepare(img, 128)
    assert np.array_equal(out, corrupt_array(prepared, "gaussian_noise", 3, seed=0, sample_id="r"))


def test_same_inputs_same_pixels_and_identity_matters():
    img = scene(40, 40)
    for name in ("gaussian_noise", "impulse_noise", "glass_blur", "frost", "elastic_transform"):
        a = corrupt(img, name, 3, seed=7, sample_id="s1")
        assert np.array_equal(a, corrupt(img, name, 3, seed=7, sample_id="s1"))
        assert not np.array_equal(a, corrupt(img, name, 3, seed=8, sample_id="s1")), name
        assert not np.array_equal(a, corrupt(img, name, 3, seed=7, sample_id="s2")), name


def test_derived_seed_separates_every_field():
    base = derive_seed(0, "a", "snow", 1)
    assert base == derive_seed(0, "a", "snow", 1)
    others = [
        derive_seed(1, "a", "snow", 1),
        derive_seed(0, "b", "snow", 1),
        derive_seed(0, "a", "fog", 1),
        derive_seed(0, "a", "snow", 2),
    ]
    assert len({base, *others}) == 5
    # No delimiter ambiguity between sample id and corruption name.
    assert derive_seed(0, "a-b", "snow", 1) != derive_seed(0, "a", "b-snow", 1)


@pytest.mark.parametrize("name", CORRUPTIONS)
def test_callers_global_rng_state_is_untouched(name):
    np.random.seed(1234)  # noqa: NPY002 - exercising the legacy global RNG on purpose
    before = np.random.get_state()  # noqa: NPY002
    corrupt(scene(32, 40), name, 5, seed=0, sample_id="g")
    after = np.random.get_state()  # noqa: NPY002
    assert before[0] == after[0] and np.array_equal(before[1], after[1])
    assert before[2:] == after[2:]


# --- conversions -------------------------------------------------------------------------------


def test_rgba_is_composited_on_white():
    rgba = np.zeros((40, 40, 4), dtype=np.uint8)
    rgba[..., 0] = 255
    rgba[:20, :, 3] = 255  # top half opaque red, bottom half fully transparent
    prepared = prepare(Image.fromarray(rgba, "RGBA"), None)
    assert (prepared[:20] == (255, 0, 0)).all()
    assert (prepared[20:] == 255).all()
    out = corrupt(Image.fromarray(rgba, "RGBA"), "contrast", 2, seed=0, sample_id="a")
    assert np.array_equal(out, corrupt(prepared, "contrast", 2, seed=0, sample_id="a"))


def test_palette_grey_and_16bit_inputs_become_rgb():
    rgb = scene(36, 44)
    palette = Image.fromarray(rgb).quantize(colors=16)
    assert np.array_equal(prepare(palette, None), np.asarray(palette.convert("RGB")))

    grey = (np.arange(36 * 44).reshape(36, 44) % 256).astype(np.uint8)
    expected = np.repeat(grey[..., None], 3, axis=2)
    assert np.array_equal(prepare(Image.fromarray(grey, "L"), None), expected)
    assert np.array_equal(prepare(grey[..., None], None), expected)

    grey16 = grey.astype(np.uint16) * 257  # 16-bit with the same 8-bit values
    assert np.array_equal(prepare(grey16, None), expected)
    img16 = Image.fromarray(grey16.astype(np.int32), "I").convert("I;16")
    assert np.array_equal(prepare(img16, None), expected)
    assert np.array_equal(prepare(grey.astype(np.float32) / 255.0, None), expected)

    out = corrupt(grey16, "shot_noise", 2, seed=0, sample_id="g")
    assert out.shape == (36, 44, 3)
    assert np.array_equal(out, corrupt(expected, "shot_noise", 2, seed=0, sample_id="g"))


# --- errors ------------------------------------------------------------------------------------


def test_too_small_images_are_rejected_with_the_sample_named():
    with pytest.raises(ValueError, match=r"sample 'tiny'.*31x40.*32 px"):
        corrupt(scene(40, 31), "fog", 1, seed=0, sample_id="tiny")
    # Resizing can make an acceptable image too small: 200x50 at longer side 64 -> 64x16.
    with pytest.raises(ValueError, match=r"64x16.*32 px"):
        corrupt(scene(50, 200), "fog", 1, seed=0, sample_id="flat", image_size=64)
    with pytest.raises(ValueError, match="32 px"):
        corrupt_array(scene(31, 64), "fog", 1, seed=0, sample_id="x")


@pytest.mark.parametrize(
    ("name", "severity", "message"),
    [
        ("gaussian", 1, "unknown corruption 'gaussian'"),
        ("fog", 0, "severity must be in 1..5; got 0"),
        ("fog", 6, "severity must be in 1..5; got 6"),
        ("fog", 2.0, "severity must be an integer"),
        ("fog", True, "severity must be an integer"),
    ],
)
def test_bad_condition_is_a_clear_value_error(name, severity, message):
    with pytest.raises(ValueError, match=message):
        corrupt(scene(32, 32), name, severity, seed=0, sample_id="e")


def test_bad_seed_and_bad_arrays_are_value_errors():
    with pytest.raises(ValueError, match="seed must be a non-negative integer"):
        corrupt(scene(32, 32), "fog", 1, seed=-1, sample_id="e")
    with pytest.raises(ValueError, match=r"\(H, W, 3\) uint8"):
        corrupt_array(scene(32, 32).astype(np.float32), "fog", 1, seed=0, sample_id="e")
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        corrupt(np.zeros((40, 40, 2), dtype=np.uint8), "fog", 1, seed=0, sample_id="e")
    with pytest.raises(ValueError, match="PIL image or a numpy array"):
        corrupt("cat.png", "fog", 1, seed=0, sample_id="e")  # type: ignore[arg-type]
