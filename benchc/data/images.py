"""Image normalisation shared by loaders and the corruption engine: RGB uint8, resized first.

docs/spec.md §1: images are converted to RGB uint8 and resized (aspect kept, longer side =
image size) *before* corruption, because corruption severities are pixel-absolute.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

#: Below this, several corruptions (glass_blur, zoom_blur, frost crops) are undefined.
MIN_SIDE = 32


def to_rgb(image: Image.Image | np.ndarray) -> Image.Image:
    """Convert any PIL mode or array to an RGB PIL image.

    Alpha is composited on white (a transparent background reads as paper, not black); 16-bit
    and float greyscale are rescaled to 8 bits by their dtype range, palettes are expanded.
    """
    if isinstance(image, np.ndarray):
        image = _array_to_pil(image)
    elif not isinstance(image, Image.Image):
        raise ValueError(f"expected a PIL image or a numpy array; got {type(image).__name__}")
    if image.mode == "RGB":
        return image
    if image.mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        arr = np.asarray(image, dtype=np.float64)
        top = 65535.0 if image.mode.startswith("I;16") or arr.max() > 255 else 255.0
        if image.mode == "F" and arr.max() <= 1.0:
            top = 1.0
        arr8 = np.clip(np.round(arr / top * 255.0), 0, 255).astype(np.uint8)
        return Image.fromarray(arr8, mode="L").convert("RGB")
    if image.mode == "P":
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "RGBa"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return image.convert("RGB")


def _array_to_pil(arr: np.ndarray) -> Image.Image:
    if arr.ndim == 2:
        if arr.dtype == np.uint16:
            return Image.fromarray(arr.astype(np.int32), mode="I").convert("I;16")
        return Image.fromarray(_to_uint8(arr), mode="L")
    if arr.ndim == 3 and arr.shape[2] in (1, 3, 4):
        arr8 = _to_uint8(arr)
        if arr.shape[2] == 1:
            return Image.fromarray(arr8[:, :, 0], mode="L")
        return Image.fromarray(arr8, mode="RGB" if arr.shape[2] == 3 else "RGBA")
    raise ValueError(
        f"image array must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4); got {arr.shape}"
    )


def _to_uint8(arr: np.ndarray) -> np.ndarray:
    if arr.dtype == np.uint8:
        return arr
    if arr.dtype == np.uint16:
        return np.round(arr.astype(np.float64) / 65535.0 * 255.0).astype(np.uint8)
    if np.issubdtype(arr.dtype, np.floating):
        scale = 255.0 if np.nanmax(arr) <= 1.0 else 1.0
        return np.clip(np.round(arr * scale), 0, 255).astype(np.uint8)
    return np.clip(arr, 0, 255).astype(np.uint8)


def resize_longer(image: Image.Image, size: int | None) -> Image.Image:
    """Resize so the longer side equals ``size`` (aspect kept, bicubic); ``None`` keeps it."""
    if size is None or max(image.size) == size:
        return image
    w, h = image.size
    scale = size / max(w, h)
    new = (max(1, round(w * scale)), max(1, round(h * scale)))
    return image.resize(new, Image.Resampling.BICUBIC)


def is_prepared(image: object, size: int | None) -> bool:
    """Whether ``image`` is what :func:`prepare` returns for ``size``: a C-contiguous (H, W, 3)
    uint8 array whose longer side is ``size`` (any, for ``None``) and shorter side at least
    :data:`MIN_SIDE`. ``prepare`` leaves such pixels as they are."""
    return (
        isinstance(image, np.ndarray)
        and image.dtype == np.uint8
        and image.ndim == 3
        and image.shape[2] == 3
        and image.flags.c_contiguous
        and (size is None or max(image.shape[:2]) == size)
        and min(image.shape[:2]) >= MIN_SIDE
    )


def prepare(
    image: Image.Image | np.ndarray, size: int | None, *, what: str = "image"
) -> np.ndarray:
    """RGB-convert, resize, check the minimum side and return a contiguous (H, W, 3) uint8 array.

    A read-only array that is already prepared is returned as it is (no copy: the suite's kept
    images go through here once per condition); a writeable one is copied, so the caller may
    change the result. ``what`` names the image in errors (e.g. ``"sample 'q17' (data/images/
    q17.png)"``).
    """
    if isinstance(image, np.ndarray) and not image.flags.writeable and is_prepared(image, size):
        return image
    rgb = resize_longer(to_rgb(image), size)
    if min(rgb.size) < MIN_SIDE:
        raise ValueError(
            f"{what}: {rgb.size[0]}x{rgb.size[1]} px after resizing is below the {MIN_SIDE} px "
            "minimum side that the corruptions need"
        )
    return np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8))
