"""Content-addressed on-disk cache of corrupted images, shared across models and processes.

A key names everything the pixels depend on (image content, image size, corruption, severity,
seed, sample id, engine and library versions), so a stale entry can never be hit and every model
evaluated on the same data and image size reuses the same files. Files are lossless PNG written
through :func:`benchc.fsutil.atomic_write`, so concurrent writers of one key (xdist workers, pool
processes) only ever expose complete files; each carries the sha256 of its pixels in a PNG text
chunk, so a file that decodes but holds other pixels (a damaged disk, a hand edit) is a miss and
is recomputed instead of silently moving the model's logits.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, PngImagePlugin

from benchc.fsutil import atomic_write

from .engine import ENGINE_VERSION, library_version

#: PNG text chunk holding the sha256 of the entry's pixels.
CHECKSUM_CHUNK = "benchc-sha256"


def pixel_digest(array: np.ndarray) -> str:
    """sha256 of an (H, W, 3) uint8 array's shape and bytes."""
    h = hashlib.sha256(repr(tuple(array.shape)).encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


#: Environment variable that overrides the default cache root.
CACHE_ENV = "BENCHC_CACHE_DIR"


#: The XDG base-directory variable for user caches (used when ``BENCHC_CACHE_DIR`` is not set).
XDG_ENV = "XDG_CACHE_HOME"


def default_cache_root() -> Path:
    """``$BENCHC_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/benchc/corruptions``, else
    ``~/.cache/benchc/corruptions``. An empty or relative ``XDG_CACHE_HOME`` is ignored, as the
    XDG base-directory specification says."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    xdg = os.environ.get(XDG_ENV, "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "benchc" / "corruptions"


@dataclass(frozen=True)
class CacheKey:
    """Identity of one corrupted image. ``content`` is :func:`engine.content_hash` of the input."""

    content: str
    image_size: int | None
    corruption: str
    severity: int
    seed: int
    sample_id: str

    def digest(self) -> str:
        payload = json.dumps(
            [
                ENGINE_VERSION,
                library_version(),
                self.content,
                self.image_size,
                self.corruption,
                int(self.severity),
                int(self.seed),
                str(self.sample_id),
            ]
        )
        return hashlib.blake2b(payload.encode("utf-8"), digest_size=20).hexdigest()


class CorruptionCache:
    """``<root>/<2 hex>/<digest>.png`` files; safe for concurrent readers and writers."""

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root) if root is not None else default_cache_root()

    def __repr__(self) -> str:
        return f"CorruptionCache({str(self.root)!r})"

    def path(self, key: CacheKey) -> Path:
        digest = key.digest()
        return self.root / digest[:2] / f"{digest}.png"

    def get(self, key: CacheKey, shape: tuple[int, ...] | None = None) -> np.ndarray | None:
        """The cached (H, W, 3) uint8 array, or ``None`` on a miss.

        An unreadable file or one whose shape differs from ``shape`` counts as a miss, so a damaged
        entry is recomputed and overwritten rather than trusted.
        """
        hit = self.read(key, shape)
        return None if hit is None else hit[0]

    def read(
        self, key: CacheKey, shape: tuple[int, ...] | None = None
    ) -> tuple[np.ndarray, bytes] | None:
        """The cached array and the PNG file's bytes it was decoded from (verified against the
        pixel checksum), or ``None`` on a miss; a server backend sends the bytes as they are."""
        path = self.path(key)
        try:
            data = path.read_bytes()
            with Image.open(io.BytesIO(data)) as im:
                im.load()
                if im.mode != "RGB":
                    return None
                recorded = im.info.get(CHECKSUM_CHUNK)
                array = np.asarray(im, dtype=np.uint8)
        except (OSError, ValueError, SyntaxError):
            return None
        if shape is not None and array.shape != tuple(shape):
            return None
        if recorded != pixel_digest(array):  # no checksum, or other pixels than were written
            return None
        return array, data

    def put(self, key: CacheKey, array: np.ndarray) -> Path:
        """Store ``array`` with its pixel checksum, atomically."""
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise ValueError(f"cache entries are (H, W, 3) uint8; got {array.shape} {array.dtype}")
        info = PngImagePlugin.PngInfo()
        info.add_text(CHECKSUM_CHUNK, pixel_digest(array))
        image = Image.fromarray(array)
        return atomic_write(
            self.path(key),
            lambda fh: image.save(fh, format="PNG", compress_level=1, pnginfo=info),
            mode=0o644,  # the cache is shared
        )
