"""VSI perturbations: blur confined to the dilated region, kernel extent, region scaling."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import ndimage

from benchc.corruptions import region_blur, region_mask, scale_region, whole_blur
from benchc.spec import VSI_DILATE_PX


def noise_image(h: int = 40, w: int = 56, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@st.composite
def boxes(draw, h: int = 40, w: int = 56):
    x0 = draw(st.integers(-5, w - 1))
    y0 = draw(st.integers(-5, h - 1))
    x1 = draw(st.integers(max(x0 + 1, 1), w + 5))
    y1 = draw(st.integers(max(y0 + 1, 1), h + 5))
    return (x0, y0, x1, y1)


@given(box=boxes(), dilate=st.integers(0, 6))
def test_box_blur_changes_nothing_outside_the_dilated_box(box, dilate):
    img = noise_image()
    out = region_blur(img, box, sigma=3.0, dilate=dilate)
    x0, y0, x1, y1 = box
    yy, xx = np.mgrid[0:40, 0:56]
    # Euclidean distance from each pixel to the (clipped) box, in pixel units.
    dx = np.maximum(np.maximum(max(x0, 0) - xx, xx - (min(x1, 56) - 1)), 0)
    dy = np.maximum(np.maximum(max(y0, 0) - yy, yy - (min(y1, 40) - 1)), 0)
    outside = np.hypot(dx, dy) > dilate
    assert np.array_equal(out[outside], img[outside])
    inside = ~outside
    assert np.array_equal(out[inside], whole_blur(img, sigma=3.0)[inside])


@given(seed=st.integers(0, 2**16), density=st.floats(0.001, 0.2))
def test_mask_blur_changes_nothing_outside_the_dilated_mask(seed, density):
    rng = np.random.default_rng(seed)
    mask = rng.random((40, 56)) < density
    mask[rng.integers(40), rng.integers(56)] = True
    img = noise_image(seed=seed % 7)
    out = region_blur(img, mask, sigma=2.0)
    grown = ndimage.distance_transform_edt(~mask) <= VSI_DILATE_PX
    assert np.array_equal(out[~grown], img[~grown])
    assert np.array_equal(out[grown], whole_blur(img, sigma=2.0)[grown])


def test_default_dilation_is_4px_euclidean():
    mask = region_mask((20, 20, 21, 21), (41, 41))  # a single pixel at (20, 20)
    assert mask[20, 24] and mask[24, 20] and not mask[20, 25]
    assert mask[23, 22] and not mask[23, 23]  # distance sqrt(13) in, sqrt(18) out


def test_kernel_is_4_sigma_plus_1_wide():
    img = np.zeros((33, 64, 3), dtype=np.uint8)
    img[:, 32] = 255  # a vertical line: the horizontal profile is the 1-D kernel
    profile = whole_blur(img, sigma=3.0)[16, :, 0].astype(int)
    assert profile[32] == profile.max() > 0
    assert (profile[26:39] > 0).all()  # radius 2 sigma = 6 on each side: 13 = 4 sigma + 1 taps
    assert (profile[:26] == 0).all() and (profile[39:] == 0).all()
    # The default sigma 20 blurs a fine checkerboard to a flat grey.
    checker = ((np.indices((64, 64)).sum(0) % 2) * 255).astype(np.uint8)
    flat = whole_blur(np.repeat(checker[..., None], 3, axis=2))
    assert flat[16:48, 16:48].std() < 1.0


def test_blur_does_not_modify_its_input():
    img = noise_image()
    copy = img.copy()
    region_blur(img, (5, 5, 20, 20))
    whole_blur(img)
    assert np.array_equal(img, copy)


def test_scale_region_maps_boxes_outward_and_keeps_thin_masks():
    assert scale_region((10, 20, 30, 41), (100, 200), (50, 100)) == (5, 10, 15, 21)
    assert scale_region((1, 1, 3, 3), (10, 10), (15, 15)) == (1, 1, 5, 5)
    mask = np.zeros((200, 100), dtype=bool)
    mask[:, 51] = True  # one-pixel column survives a 4x downscale
    small = scale_region(mask, (100, 200), (25, 50))
    assert small.shape == (50, 25) and small.dtype == np.bool_
    assert small[:, 12].all() and small.sum() == 50


@pytest.mark.parametrize(
    ("region", "message"),
    [
        ((10, 10, 10, 20), "empty"),
        ((100, 100, 120, 120), "does not overlap"),
        ((1, 2, 3), "4 finite numbers"),
        ((0, 0, float("nan"), 5), "4 finite numbers"),
        ("box", "box or a bool mask"),
        (np.zeros((40, 56), dtype=bool), "selects no pixels"),
        (np.ones((20, 28), dtype=bool), "scale_region"),
        (np.ones((40, 56), dtype=np.uint8), "must be bool"),
    ],
)
def test_bad_regions_are_value_errors(region, message):
    with pytest.raises(ValueError, match=message):
        region_blur(noise_image(), region)


def test_bad_images_and_sigmas_are_value_errors():
    with pytest.raises(ValueError, match="uint8"):
        whole_blur(noise_image().astype(np.float32))
    with pytest.raises(ValueError, match=r"\(H, W, 3\)"):
        whole_blur(noise_image()[..., 0])
    with pytest.raises(ValueError, match="sigma"):
        whole_blur(noise_image(), sigma=0)
    with pytest.raises(ValueError, match="does not match"):
        scale_region(np.ones((5, 5), dtype=bool), (6, 5), (3, 3))


def test_cached_blurs_are_the_definitions_bit_for_bit_and_a_second_call_blurs_nothing(tmp_path):
    from benchc.corruptions import CorruptionCache, blur_calls, cached_blur
    from benchc.corruptions.cache import decode_rgb

    cache = CorruptionCache(tmp_path)
    img = noise_image(48, 64, seed=3)
    mask = np.zeros((48, 64), bool)
    mask[10:14, 20:31] = True
    regions = [(5, 6, 30, 22), mask, None]
    before = blur_calls()
    first = [cached_blur(img, r, cache, sigma=3.0) for r in regions]
    assert blur_calls() - before == 1  # one Gaussian pass serves both regions and the whole
    expected = [region_blur(img, r, sigma=3.0) for r in regions[:2]] + [whole_blur(img, 3.0)]
    before = blur_calls()
    again = [cached_blur(img, r, cache, sigma=3.0) for r in regions]
    assert blur_calls() == before  # all read from the cache
    for (a, png_a), (b, png_b), want in zip(first, again, expected, strict=True):
        assert np.array_equal(a, want) and np.array_equal(b, want)
        assert png_a == png_b and np.array_equal(decode_rgb(png_b), want)  # the bytes sent
        assert not b.flags.writeable
    # the key names sigma, the region and the pixels: another of any is a miss, not a stale hit
    other_box = cached_blur(img, (5, 6, 31, 22), cache, sigma=3.0)[0]
    assert np.array_equal(other_box, region_blur(img, (5, 6, 31, 22), sigma=3.0))
    assert np.array_equal(cached_blur(img, None, cache, sigma=2.0)[0], whole_blur(img, 2.0))
    img2 = img.copy()
    img2[0, 0, 0] ^= 1
    assert np.array_equal(cached_blur(img2, None, cache, sigma=3.0)[0], whole_blur(img2, 3.0))
    # no cache: the plain functions, no bytes
    got, png = cached_blur(img, regions[0], None, sigma=3.0)
    assert png is None and np.array_equal(got, expected[0])
