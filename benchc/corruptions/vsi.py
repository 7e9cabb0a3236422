"""VSI perturbations (docs/spec.md §5): Gaussian blur inside a dilated region, or everywhere.

The blur uses kernel size 4 sigma + 1 (radius round(2 sigma)), reflect borders, and is computed on
the whole image so pixels near the region edge see their true neighbours; only pixels inside the
region dilated by ``dilate`` px (Euclidean) are replaced, every other pixel is copied unchanged.

Blurred images are content-addressed on the corruption cache (:func:`cached_blur`): the key names
the prepared image's pixels, the region as applied, sigma, the dilation and the blur's own version
(with scipy's), so a second model on the same VSI set and image size reads them and blurs nothing.
A region blur and the whole-image blur of one image share one Gaussian pass.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import scipy
from PIL import Image
from scipy import ndimage

from benchc.spec import VSI_DILATE_PX, VSI_SIGMA

if TYPE_CHECKING:
    from benchc.corruptions.cache import CorruptionCache

#: Version of the blur's definition (docs/spec.md §5); part of every cached blur's key.
BLUR_VERSION = "vsi-blur-1"

_blur_lock = threading.Lock()
_blur_calls = 0


def blur_calls() -> int:
    """Gaussian passes this process has computed so far (a cache hit computes none)."""
    return _blur_calls


#: A box ``(x0, y0, x1, y1)`` (x1, y1 exclusive) or a bool mask ``(H, W)``.
Region = tuple[int, int, int, int] | np.ndarray


def _check_image(image_array: np.ndarray) -> None:
    if (
        not isinstance(image_array, np.ndarray)
        or image_array.ndim != 3
        or image_array.shape[2] != 3
    ):
        shape = getattr(image_array, "shape", type(image_array).__name__)
        raise ValueError(f"expected a (H, W, 3) image array; got {shape}")
    if image_array.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image array; got dtype {image_array.dtype}")


def _blurred(image_array: np.ndarray, sigma: float) -> np.ndarray:
    if not np.isfinite(sigma) or sigma <= 0:
        raise ValueError(f"blur sigma must be a positive number; got {sigma!r}")
    global _blur_calls
    with _blur_lock:
        _blur_calls += 1
    radius = max(1, round(2 * sigma))  # kernel size 2 * radius + 1 = 4 sigma + 1
    out = ndimage.gaussian_filter(
        image_array.astype(np.float64), sigma=sigma, radius=radius, axes=(0, 1), mode="reflect"
    )
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def whole_blur(image_array: np.ndarray, sigma: float = VSI_SIGMA) -> np.ndarray:
    """Blur every pixel (the VSI fallback when no region is known)."""
    _check_image(image_array)
    return _blurred(image_array, float(sigma))


def region_mask(
    region: Region, shape: tuple[int, int], *, dilate: int = VSI_DILATE_PX
) -> np.ndarray:
    """Bool (H, W) mask of ``region`` dilated by ``dilate`` px; errors name what is wrong."""
    mask = _undilated_mask(region, shape)
    _check_dilate(dilate)
    if dilate:
        mask = ndimage.distance_transform_edt(~mask) <= dilate
    return mask


def _check_dilate(dilate: int) -> None:
    if isinstance(dilate, bool) or int(dilate) != dilate or dilate < 0:
        raise ValueError(f"dilate must be a non-negative integer; got {dilate!r}")


def _undilated_mask(region: Region, shape: tuple[int, int]) -> np.ndarray:
    """:func:`region_mask` before the dilation (every check but the dilation's; cheap: the
    dilation's distance transform is 3 ms at 448 px, so a cache hit skips it)."""
    h, w = shape
    if isinstance(region, np.ndarray):
        if region.shape != (h, w):
            raise ValueError(
                f"region mask has shape {region.shape} but the image is {(h, w)}; "
                "map it with scale_region first"
            )
        if region.dtype != np.bool_:
            raise ValueError(f"region mask must be bool; got dtype {region.dtype}")
        mask = region.copy()
    else:
        x0, y0, x1, y1 = _box(region)
        cx0, cy0, cx1, cy1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
        if cx0 >= cx1 or cy0 >= cy1:
            raise ValueError(f"region box {tuple(region)} does not overlap the {w}x{h} image")
        mask = np.zeros((h, w), dtype=bool)
        mask[cy0:cy1, cx0:cx1] = True
    if not mask.any():
        raise ValueError("region mask selects no pixels")
    return mask


def region_blur(
    image_array: np.ndarray,
    region: Region,
    *,
    sigma: float = VSI_SIGMA,
    dilate: int = VSI_DILATE_PX,
) -> np.ndarray:
    """Blur the pixels inside ``region`` (array pixel coordinates) dilated by ``dilate`` px."""
    _check_image(image_array)
    mask = region_mask(region, image_array.shape[:2], dilate=dilate)
    return _composite(image_array, _blurred(image_array, float(sigma)), mask)


def _composite(image_array: np.ndarray, blurred: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = image_array.copy()
    out[mask] = blurred[mask]
    return out


def region_digest(region: Region) -> str:
    """The identity of a region as applied (after :func:`scale_region`): a box's integer corners,
    or a mask's shape and bits."""
    if isinstance(region, np.ndarray):
        h = hashlib.blake2b(repr(("mask", region.shape)).encode(), digest_size=16)
        h.update(np.packbits(np.ascontiguousarray(region, dtype=bool)).tobytes())
        return h.hexdigest()
    return repr(("box", _box(region)))


@dataclass(frozen=True)
class BlurKey:
    """Identity of one blurred image on the corruption cache (:class:`CorruptionCache` takes
    any key with a ``digest``). ``content``: :func:`benchc.corruptions.content_hash` of the
    prepared image; ``region``: :func:`region_digest`, ``None`` for the whole-image blur."""

    content: str
    region: str | None
    sigma: float
    dilate: int

    def digest(self) -> str:
        payload = json.dumps(
            [
                BLUR_VERSION,
                scipy.__version__,
                self.content,
                self.region,
                float(self.sigma),
                int(self.dilate) if self.region is not None else None,
            ]
        )
        return hashlib.blake2b(payload.encode("utf-8"), digest_size=20).hexdigest()


def cached_blur(
    image_array: np.ndarray,
    region: Region | None,
    cache: CorruptionCache | None,
    *,
    sigma: float = VSI_SIGMA,
    dilate: int = VSI_DILATE_PX,
    content: str | None = None,
) -> tuple[np.ndarray, bytes | None]:
    """:func:`region_blur` (``region`` given) or :func:`whole_blur` (``None``) of a prepared
    image, read from ``cache`` when an earlier run (any model) stored it, else computed and
    stored; bit for bit what the uncached functions return. Returns the read-only pixels and the
    PNG file's bytes they are (sent to a server as they are); ``cache=None``: no cache, no
    bytes. ``content``: the image's content hash when the caller knows it."""
    _check_image(image_array)
    if cache is None:
        if region is None:
            return whole_blur(image_array, sigma), None
        return region_blur(image_array, region, sigma=sigma, dilate=dilate), None
    content, key = _blur_key(image_array, region, sigma, dilate, content)
    hit = cache.read(key, image_array.shape)
    if hit is not None:
        return hit
    if region is None:
        out = _blurred(image_array, float(sigma))
    else:
        whole, _ = cached_blur(image_array, None, cache, sigma=sigma, content=content)
        out = _composite(image_array, whole, region_mask(region, whole.shape[:2], dilate=dilate))
    data = cache.store(key, out)
    out.flags.writeable = False
    return out, data


def cached_blur_file(
    image_array: np.ndarray,
    region: Region | None,
    cache: CorruptionCache,
    *,
    sigma: float = VSI_SIGMA,
    dilate: int = VSI_DILATE_PX,
    content: str | None = None,
) -> tuple[bytes, str]:
    """:func:`cached_blur`'s PNG file bytes and its pixels' CRC-32 for a backend that sends
    files (a server): a stored blur is read and checked without decoding its pixels (5 ms of
    a 448-px photograph's two blurs per run); a missing one is made and stored first."""
    _check_image(image_array)
    _, key = _blur_key(image_array, region, sigma, dilate, content)
    hit = cache.read_file(key, image_array.shape)
    if hit is not None:
        return hit
    from benchc.data.png import pixel_crc

    out, data = cached_blur(image_array, region, cache, sigma=sigma, dilate=dilate, content=content)
    assert data is not None  # a cache was given
    return data, pixel_crc(out)


def _blur_key(
    image_array: np.ndarray, region: Region | None, sigma: float, dilate: int, content: str | None
) -> tuple[str, BlurKey]:
    """The image's content hash and the cache key of its blur; the region is checked first."""
    from benchc.corruptions.batch import known_hash

    content = content if content is not None else known_hash(image_array)
    if region is None:
        return content, BlurKey(content, None, float(sigma), 0)
    _undilated_mask(region, image_array.shape[:2])
    _check_dilate(dilate)
    return content, BlurKey(content, region_digest(region), float(sigma), int(dilate))


def _box(region: object) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = _box_floats(region)
    return int(np.floor(x0)), int(np.floor(y0)), int(np.ceil(x1)), int(np.ceil(y1))


def scale_region(region: Region, from_size: tuple[int, int], to_size: tuple[int, int]) -> Region:
    """Map a region annotated on an image of ``from_size`` onto one of ``to_size``.

    Sizes are ``(width, height)`` as PIL's ``Image.size``. Boxes scale outward (floor/ceil) and
    masks keep every target pixel that any source pixel covers, so the region never shrinks away.
    """
    (fw, fh), (tw, th) = from_size, to_size
    if min(fw, fh, tw, th) <= 0:
        raise ValueError(f"sizes must be positive (width, height); got {from_size} -> {to_size}")
    if isinstance(region, np.ndarray):
        if region.shape != (fh, fw):
            raise ValueError(
                f"region mask shape {region.shape} does not match from_size {from_size}"
            )
        if (fw, fh) == (tw, th):
            return region.astype(bool)
        scaled = Image.fromarray(region.astype(np.uint8) * 255).resize(
            (tw, th), Image.Resampling.BOX
        )
        return np.asarray(scaled) > 0
    x0, y0, x1, y1 = _box_floats(region)
    sx, sy = tw / fw, th / fh
    return (
        int(np.floor(x0 * sx)),
        int(np.floor(y0 * sy)),
        int(np.ceil(x1 * sx)),
        int(np.ceil(y1 * sy)),
    )


def _box_floats(region: object) -> tuple[float, float, float, float]:
    try:
        values = tuple(float(v) for v in region)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise ValueError(
            f"region must be a (x0, y0, x1, y1) box or a bool mask; got {region!r}"
        ) from None
    if len(values) != 4 or not all(np.isfinite(values)):
        raise ValueError(f"region box must be 4 finite numbers (x0, y0, x1, y1); got {region!r}")
    if values[2] <= values[0] or values[3] <= values[1]:
        raise ValueError(f"region box {region!r} is empty (need x0 < x1 and y0 < y1)")
    return values  # type: ignore[return-value]
