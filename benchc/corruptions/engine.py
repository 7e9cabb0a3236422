"""Seeded, resize-first corruption of one image: the single place that calls ``imagecorruptions``.

Uses the numpy-2 compatible fork ``imagecorruptions-imaug``. Its glass_blur and impulse_noise take
``seed=``; the other random ones draw from numpy's global RNG, which is seeded per call and then
restored (:mod:`benchc.corruptions.seeding`), so the output depends only on the inputs.
"""

from __future__ import annotations

import functools
import hashlib
from importlib import metadata

import numpy as np
from PIL import Image

from benchc.data.images import MIN_SIDE, prepare
from benchc.spec import CORRUPTIONS, SEVERITIES

from .seeding import derive_seed, seed_int, seed_uint32, seeded_global_rng

#: Bump when anything in this package changes the pixels it produces (invalidates the cache).
ENGINE_VERSION = "benchc-corruptions-1"

#: Corruptions whose library function takes ``seed=`` (passing it to the others is a TypeError).
_SEED_KWARG = {"glass_blur": seed_uint32, "impulse_noise": seed_int}

#: Packages whose numerics shape the output pixels; their versions enter every cache key.
_NUMERIC_PACKAGES = (
    "imagecorruptions-imaug",
    "numpy",
    "scipy",
    "scikit-image",
    "opencv-python-headless",
    "opencv-python",
    "pillow",
    "numba",
)


@functools.cache
def library_version() -> str:
    """Versions of the packages computing the pixels: ``imagecorruptions-imaug=1.1.5;numpy=...``."""
    parts = []
    for name in _NUMERIC_PACKAGES:
        try:
            parts.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ";".join(parts)


@functools.cache
def _library():
    """Import lazily (skimage, cv2 and numba cost ~0.6 s) and enable numba's on-disk cache.

    glass_blur's numba kernel otherwise recompiles in every process (~4 s); cached it loads in
    ~0.5 s. Numba falls back to a user-wide cache directory when site-packages is read-only.
    """
    import imagecorruptions
    from imagecorruptions import corruptions as impl

    kernel = getattr(impl, "_shuffle_pixels_njit_glass_blur", None)
    if kernel is not None and hasattr(kernel, "enable_caching"):
        try:
            kernel.enable_caching()
        except Exception:  # caching is an optimisation only; compiling still works
            pass
    return imagecorruptions


def check_condition(name: str, severity: int) -> None:
    """Raise a ValueError naming the bad corruption name or severity."""
    if name not in CORRUPTIONS:
        raise ValueError(f"unknown corruption {name!r}; expected one of {', '.join(CORRUPTIONS)}")
    if isinstance(severity, bool) or not isinstance(severity, (int, np.integer)):
        raise ValueError(f"severity must be an integer in 1..5; got {severity!r} for {name}")
    if int(severity) not in SEVERITIES:
        raise ValueError(f"severity must be in 1..5; got {severity} for {name}")


def check_prepared(array: np.ndarray, *, what: str = "image") -> None:
    """Raise a ValueError unless ``array`` is a (H, W, 3) uint8 array with both sides >= 32."""
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{what}: expected a numpy array, got {type(array).__name__}")
    if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
        raise ValueError(
            f"{what}: expected a (H, W, 3) uint8 array (use benchc.data.images.prepare); "
            f"got shape {array.shape} dtype {array.dtype}"
        )
    if min(array.shape[:2]) < MIN_SIDE:
        raise ValueError(
            f"{what}: {array.shape[1]}x{array.shape[0]} px is below the {MIN_SIDE} px minimum side"
        )


def corrupt_array(
    array: np.ndarray, name: str, severity: int, *, seed: int, sample_id: str | int
) -> np.ndarray:
    """Corrupt an already prepared (H, W, 3) uint8 array; returns a new array of the same shape."""
    check_condition(name, severity)
    check_prepared(array, what=f"sample {sample_id!r}")
    severity = int(severity)
    digest = derive_seed(seed, sample_id, name, severity)
    kwargs = {"seed": _SEED_KWARG[name](digest)} if name in _SEED_KWARG else {}
    lib = _library()
    with seeded_global_rng(digest):
        out = lib.corrupt(
            np.ascontiguousarray(array), severity=severity, corruption_name=name, **kwargs
        )
    out = np.ascontiguousarray(np.asarray(out, dtype=np.uint8))
    if out.shape != array.shape:
        raise RuntimeError(
            f"{name}-{severity} returned shape {out.shape} for input {array.shape} "
            f"(sample {sample_id!r})"
        )
    return out


def corrupt(
    image: Image.Image | np.ndarray,
    name: str,
    severity: int,
    *,
    seed: int,
    sample_id: str | int,
    image_size: int | None = None,
) -> np.ndarray:
    """RGB-convert, resize (longer side = ``image_size``; ``None`` keeps it), then corrupt.

    Returns a (H, W, 3) uint8 array, bit-identical for the same inputs in any process.
    """
    check_condition(name, severity)
    array = prepare(image, image_size, what=f"sample {sample_id!r}")
    return corrupt_array(array, name, severity, seed=seed, sample_id=sample_id)


def content_hash(array: np.ndarray) -> str:
    """Hex digest of a prepared array's shape and pixels (the cache's image identity)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(repr((array.shape, str(array.dtype))).encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()
