"""Stable per-call seeds and a guarded global RNG.

Most ``imagecorruptions`` functions draw from numpy's *global* RNG, so reproducibility needs
that state set from a stable hash of the call's identity and then restored, leaving the caller's
own random stream untouched. Python's ``hash`` is salted per process, hence blake2b.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: Bump to change every derived seed (and so every cached image).
SEED_SCHEME = "benchc-corruption-seed-v1"

# The global RNG is process state: serialise users within a process so threads cannot
# interleave their seed/draw/restore sequences.
_GLOBAL_RNG_LOCK = threading.RLock()


def derive_seed(seed: int, sample_id: str | int, corruption: str, severity: int) -> bytes:
    """16-byte digest of ``(seed, sample id, corruption, severity)``, equal in every process."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    payload = json.dumps([SEED_SCHEME, int(seed), str(sample_id), corruption, int(severity)])
    return hashlib.blake2b(payload.encode("utf-8"), digest_size=16).digest()


def seed_words(digest: bytes) -> np.ndarray:
    """The digest as four little-endian uint32 words, the legacy global RNG's seed array."""
    return np.frombuffer(digest, dtype="<u4").astype(np.uint32)


def seed_uint32(digest: bytes) -> int:
    """A 32-bit seed for consumers limited to one word (numba's ``np.random.seed``)."""
    return int.from_bytes(digest[:4], "little")


def seed_int(digest: bytes) -> int:
    """The full 128-bit seed for ``np.random.default_rng``-style consumers."""
    return int.from_bytes(digest, "little")


@contextmanager
def seeded_global_rng(digest: bytes) -> Iterator[None]:
    """Seed numpy's global RNG from ``digest`` for the block, then restore the caller's state."""
    with _GLOBAL_RNG_LOCK:
        saved = np.random.get_state()  # noqa: NPY002 - the library uses it
        np.random.seed(seed_words(digest))  # noqa: NPY002
        try:
            yield
        finally:
            np.random.set_state(saved)  # noqa: NPY002
