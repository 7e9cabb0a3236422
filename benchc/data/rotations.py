"""Cyclic rotations of a sample's options (docs/spec.md §1, option order).

A rotation by ``r`` presents the same options in the order ``o_r, o_{r+1}, ..., o_{r-1}``: the
option set, the question and the image are untouched, only which letter names which content
changes. Position ``j`` under rotation ``r`` shows content ``(j + r) mod K``, so the correct
option sits at position ``(y - r) mod K``.

Which rotations a sample gets depends only on its K, its id and the run's seed, never on the
condition: every condition of a sample sees the same rotations, so option order stays paired
across conditions exactly as the image does. For K up to :data:`ALL_ROTATIONS_UP_TO` every
rotation is scored; above that rotation 0 (the order given) and a seeded subset of
``MAX_ROTATIONS - 1`` others (blake2b of seed and id: the same in every process).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

#: Every rotation is scored for K up to this (K forward passes per sample and condition).
ALL_ROTATIONS_UP_TO = 6
#: Above that, rotation 0 and a seeded subset: this many rotations in all.
MAX_ROTATIONS = 6
#: Bump to change every drawn subset.
ROTATION_SCHEME = "benchc-rotation-v1"

__all__ = [
    "ALL_ROTATIONS_UP_TO",
    "MAX_ROTATIONS",
    "n_rotations",
    "rotate",
    "rotated_answer",
    "rotations",
]


def n_rotations(n_options: int) -> int:
    """How many rotations a sample of ``n_options`` options is scored under (0 included)."""
    return n_options if n_options <= ALL_ROTATIONS_UP_TO else MAX_ROTATIONS


def rotations(n_options: int, sample_id: str, seed: int = 0) -> tuple[int, ...]:
    """The rotations scored for a sample of ``n_options`` options, rising, 0 first."""
    if n_options < 2:
        raise ValueError(f"sample {sample_id!r}: a rotation needs >= 2 options, got {n_options}")
    if n_options <= ALL_ROTATIONS_UP_TO:
        return tuple(range(n_options))
    payload = json.dumps([ROTATION_SCHEME, int(seed), str(sample_id), int(n_options)])
    digest = hashlib.blake2b(payload.encode("utf-8"), digest_size=16).digest()
    rng = np.random.default_rng(int.from_bytes(digest, "little"))
    drawn = rng.choice(np.arange(1, n_options), size=MAX_ROTATIONS - 1, replace=False)
    return (0, *sorted(int(r) for r in drawn))


def rotate(options: Sequence[str], r: int) -> tuple[str, ...]:
    """The options in the order rotation ``r`` presents them."""
    k = len(options)
    return tuple(options[(j + r) % k] for j in range(k))


def rotated_answer(answer: int, r: int, n_options: int) -> int:
    """The position of the correct option under rotation ``r``."""
    return (answer - r) % n_options
