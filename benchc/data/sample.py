"""The sample and dataset model of docs/spec.md §1: what every later stage consumes.

A ``Sample`` is immutable and holds its image as encoded bytes, so a dataset of a few thousand
samples stays small in memory and its fingerprint is a hash of what is on disk.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from benchc.spec import LETTERS

#: A question-relevant region: a box ``(x0, y0, x1, y1)`` in original image pixels
#: (x1, y1 exclusive), or a boolean mask of the original image's shape ``(H, W)``.
Region = tuple[int, int, int, int] | np.ndarray


@dataclass(frozen=True)
class Sample:
    """One multiple-choice VQA item. Options and prompt never change across conditions."""

    id: str
    image_bytes: bytes
    question: str
    options: tuple[str, ...]
    answer: int
    meta: Mapping[str, Any] = field(default_factory=dict)

    @property
    def k(self) -> int:
        """Number of options K."""
        return len(self.options)

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer]

    @property
    def category(self) -> str | None:
        return self.meta.get("category")

    @property
    def hint(self) -> str | None:
        return self.meta.get("hint")

    @property
    def region(self) -> Region | None:
        """The annotated question-relevant region, or ``None`` (VSI then needs a fallback)."""
        return self.meta.get("region")

    def image(self) -> Image.Image:
        """Decode the image as RGB (alpha composited on white, palette/16-bit/grey converted)."""
        from benchc.data.images import to_rgb

        return to_rgb(Image.open(io.BytesIO(self.image_bytes)))


@dataclass(frozen=True)
class Dataset:
    """An ordered, validated collection of samples with a content fingerprint for cache keys."""

    name: str
    samples: Sequence[Sample]
    fingerprint: str
    skipped: Mapping[str, str] = field(default_factory=dict)  # sample id/line -> reason (--lenient)
    #: The file or folder it was loaded from, for error messages (not part of the fingerprint).
    source: str = ""

    def __len__(self) -> int:
        return len(self.samples)

    def __iter__(self):
        return iter(self.samples)

    def __getitem__(self, i: int) -> Sample:
        return self.samples[i]

    @property
    def ids(self) -> list[str]:
        return [s.id for s in self.samples]

    @property
    def answers(self) -> np.ndarray:
        return np.array([s.answer for s in self.samples], dtype=np.int64)

    @property
    def n_options(self) -> np.ndarray:
        return np.array([s.k for s in self.samples], dtype=np.int64)
