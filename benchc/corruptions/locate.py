"""Pluggable region locators for VSI (docs/spec.md §5: annotation, else a locator, else the
whole image).

A locator maps an image to the box VSI should blur, or ``None`` when it finds nothing useful (the
suite then blurs the whole image and counts the fallback). Locators are model-independent, like
every corruption, so the same image always gets the same region.

Choose one by name (``--region-locator=foreground``) or by import path
(``--region-locator=my_pkg.regions:locate``, any callable ``(PIL.Image) -> box | None``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Protocol

import numpy as np
from PIL import Image

Box = tuple[int, int, int, int]


class RegionLocator(Protocol):
    """``locator(image) -> (x0, y0, x1, y1)`` in the image's pixel coordinates, or ``None``."""

    def __call__(self, image: Image.Image) -> Box | None: ...


class ForegroundLocator:
    """The bounding box of pixels that differ from the background colour.

    Why: for documents, charts and rendered scenes the question is about the content drawn on a
    plain background, and blurring the background tells nothing. The background colour is the
    median of the one-pixel border; a pixel is foreground when any channel differs from it by
    more than ``tolerance``. Returns ``None`` when nothing (or nearly everything, at least
    ``max_cover`` of the image) is foreground: a whole-image box is no localisation.
    """

    def __init__(self, tolerance: int = 24, max_cover: float = 0.9) -> None:
        if not 0 <= tolerance <= 255:
            raise ValueError(f"tolerance must be in 0..255, got {tolerance}")
        if not 0 < max_cover <= 1:
            raise ValueError(f"max_cover must be in (0, 1], got {max_cover}")
        self.tolerance, self.max_cover = tolerance, max_cover

    def __call__(self, image: Image.Image) -> Box | None:
        arr = np.asarray(image.convert("RGB"), dtype=np.int16)
        h, w = arr.shape[:2]
        border = np.concatenate([arr[0], arr[-1], arr[:, 0], arr[:, -1]])
        background = np.median(border, axis=0)
        fg = (np.abs(arr - background) > self.tolerance).any(axis=2)
        rows, cols = np.nonzero(fg.any(axis=1))[0], np.nonzero(fg.any(axis=0))[0]
        if rows.size == 0:
            return None
        box = (int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1)
        if (box[2] - box[0]) * (box[3] - box[1]) >= self.max_cover * h * w:
            return None
        return box


#: Built-in locators by name; ``none`` keeps the whole-image fallback of docs/spec.md §5.
LOCATORS: dict[str, Callable[[], RegionLocator | None]] = {
    "none": lambda: None,
    "foreground": ForegroundLocator,
}


def resolve_locator(name: str) -> RegionLocator | None:
    """A built-in locator by name, or ``module:attr`` (a locator, or a class to instantiate)."""
    if name in LOCATORS:
        return LOCATORS[name]()
    module, sep, attr = name.partition(":")
    if not sep or not module or not attr:
        raise ValueError(
            f"unknown region locator {name!r}: use one of {', '.join(LOCATORS)} "
            "or an import path 'module:callable'"
        )
    try:
        obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"region locator {name!r} cannot be imported: {exc}") from exc
    if isinstance(obj, type):
        obj = obj()
    if not callable(obj):
        raise ValueError(f"region locator {name!r} is not callable")
    return obj


__all__ = ["LOCATORS", "Box", "ForegroundLocator", "RegionLocator", "resolve_locator"]
