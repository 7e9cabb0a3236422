"""Content-addressed on-disk cache of corrupted images, shared across models and processes.

A key names everything the pixels depend on (image content, image size, corruption, severity,
seed, sample id, engine and library versions), so a stale entry can never be hit and every model
evaluated on the same data and image size reuses the same files. Files are lossless PNG written
through :func:`benchc.fsutil.atomic_write`, so concurrent writers of one key (xdist workers, pool
processes) only ever expose complete files; each carries a checksum of its pixels in a PNG text
chunk, so a file that decodes but holds other pixels (a damaged disk, a hand edit) is a miss and
is recomputed instead of silently moving the model's logits.

A warm run reads one entry per query, so reading is on the GPU path's critical budget
(docs/guides/gpu.md): entries are written with one PNG filter for every row ("Up") instead of
Pillow's per-row adaptive choice, whose Paeth rows make decoding 1.7x slower (4.4 -> 2.6 ms at
448 px), decoded by OpenCV (2.1 ms) and checked with CRC-32 (0.07 ms) instead of sha256 (0.5 ms).
Entries written before (sha256 chunk, adaptive filters) are read and checked as they are.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from benchc.data.png import decode_rgb, encode_png, pixel_crc, with_text
from benchc.fsutil import atomic_write

from .engine import ENGINE_VERSION, library_version

#: PNG text chunk holding the CRC-32 of the entry's pixels (entries written now).
CHECKSUM_CHUNK = "benchc-crc32"
#: PNG text chunk holding the sha256 of the entry's pixels (entries written before).
SHA256_CHUNK = "benchc-sha256"
#: PNG text chunk holding the CRC-32 of the entry's compressed pixel stream (its IDAT chunks'
#: data, as written): a reader that sends the file and needs no pixels checks it instead of
#: decoding (the same stream decodes to the same pixels, those :data:`CHECKSUM_CHUNK` names).
STREAM_CHUNK = "benchc-idat-crc32"

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def pixel_digest(array: np.ndarray) -> str:
    """sha256 of an (H, W, 3) uint8 array's shape and bytes (the older entries' checksum)."""
    h = hashlib.sha256(repr(tuple(array.shape)).encode())
    h.update(np.ascontiguousarray(array).tobytes())
    return h.hexdigest()


def _checksum_ok(info: dict, array: np.ndarray) -> bool:
    """Whether the entry's recorded checksum (either kind) matches ``array``; none recorded: no."""
    recorded = info.get(CHECKSUM_CHUNK)
    if recorded is not None:
        return recorded == pixel_crc(array)
    recorded = info.get(SHA256_CHUNK)
    return recorded is not None and recorded == pixel_digest(array)


def png_chunks(data: bytes) -> list[tuple[bytes, memoryview, int]] | None:
    """A PNG file's chunks as (type, data, recorded CRC), or None when it is not one."""
    if not data.startswith(_PNG_SIGNATURE):
        return None
    view, pos, out = memoryview(data), 8, []
    while pos + 12 <= len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        end = pos + 8 + length
        if end + 4 > len(data):
            return None
        kind = bytes(view[pos + 4 : pos + 8])
        (crc,) = struct.unpack_from(">I", data, end)
        out.append((kind, view[pos + 8 : end], crc))
        pos = end + 4
        if kind == b"IEND":
            return out
    return None


def stream_crc(chunks: list[tuple[bytes, memoryview, int]]) -> str:
    """CRC-32 of the concatenated IDAT data of ``chunks``, as 8 hex digits."""
    crc = 0
    for kind, body, _ in chunks:
        if kind == b"IDAT":
            crc = zlib.crc32(body, crc)
    return f"{crc:08x}"


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


@dataclass(frozen=True)
class PreparedKey:
    """Identity of a prepared (clean) image's own entry. ``content``: its
    :func:`~benchc.corruptions.content_hash`. A server backend sends this file instead of
    encoding the pixels in every run (8 ms per 448-px photograph)."""

    content: str

    def digest(self) -> str:
        payload = json.dumps(["prepared", ENGINE_VERSION, self.content])
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
            with Image.open(io.BytesIO(data)) as im:  # the header and text chunks: no pixels
                if im.mode != "RGB":
                    return None
                info = dict(im.info)
        except (OSError, ValueError, SyntaxError):
            return None
        array = decode_rgb(data)
        if array is None:
            return None
        if shape is not None and array.shape != tuple(shape):
            return None
        if not _checksum_ok(info, array):  # no checksum, or other pixels than were written
            return None
        return array, data

    def read_file(self, key: CacheKey, shape: tuple[int, ...]) -> tuple[bytes, str] | None:
        """The cached PNG file's bytes and its pixels' CRC-32 (:func:`pixel_crc`), checked
        without decoding the pixels: an 8-bit RGB file of ``shape`` whose compressed stream is
        the one written (:data:`STREAM_CHUNK`); ``None`` otherwise (a miss, or an entry
        written before the stream's CRC was recorded: :meth:`read` checks it by its pixels).
        For a server backend, which sends the file as it is and never reads the pixels."""
        try:
            data = self.path(key).read_bytes()
        except OSError:
            return None
        chunks = png_chunks(data)
        if not chunks or chunks[0][0] != b"IHDR" or len(chunks[0][1]) != 13:
            return None
        ihdr = chunks[0][1]
        if zlib.crc32(b"IHDR" + bytes(ihdr)) != chunks[0][2]:
            return None
        w, h, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", ihdr)
        if (h, w, 3) != tuple(shape) or depth != 8 or colour != 2 or interlace != 0:
            return None
        text = {}
        for kind, body, crc in chunks:
            if kind == b"tEXt" and zlib.crc32(b"tEXt" + bytes(body)) == crc:
                name, _, value = bytes(body).partition(b"\0")
                text[name.decode("latin-1")] = value.decode("latin-1")
        pixels, stream = text.get(CHECKSUM_CHUNK), text.get(STREAM_CHUNK)
        if pixels is None or stream is None or stream != stream_crc(chunks):
            return None
        return data, pixels

    def file_of(self, key: PreparedKey, array: np.ndarray) -> tuple[bytes, str]:
        """Entry ``key``, which holds exactly ``array`` (a content-addressed key), as its PNG
        file's bytes and its pixels' CRC-32: read without decoding when stored
        (:meth:`read_file`), else written first. For a server backend, which sends files.

        A cache that cannot be written (a read-only mount of a warm cache) still gives the
        file, encoded in memory: these entries only save a later run's encoding."""
        hit = self.read_file(key, array.shape)
        if hit is not None:
            return hit
        try:
            data = self.store(key, array)
        except OSError:
            data = self._encode(array)
        return data, pixel_crc(array)

    def put(self, key: CacheKey, array: np.ndarray) -> Path:
        """Store ``array`` with its pixel checksum, atomically."""
        data = self._encode(array)
        return atomic_write(self.path(key), data, mode=0o644)  # the cache is shared

    def store(self, key: CacheKey, array: np.ndarray) -> bytes:
        """:meth:`put`, returning the file's bytes (what :meth:`read` would return)."""
        data = self._encode(array)
        atomic_write(self.path(key), data, mode=0o644)
        return data

    @staticmethod
    def _encode(array: np.ndarray) -> bytes:
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise ValueError(f"cache entries are (H, W, 3) uint8; got {array.shape} {array.dtype}")
        data = encode_png(array, {})
        chunks = png_chunks(data)
        assert chunks is not None
        text = {CHECKSUM_CHUNK: pixel_crc(array), STREAM_CHUNK: stream_crc(chunks)}
        return with_text(data, text)
