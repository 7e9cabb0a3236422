"""Limits on what a dataset may hold, checked while loading (before any model is loaded).

Why: a model-release CI is fed datasets other people prepared. Without limits a 5 MB question
grew a run to 24 GB and was OOM-killed without a word, a 12000 x 12000 PNG was decoded into
430 MB, a 1 x 1 image was upscaled and scored, a path of ``../../etc/passwd`` was opened, and a
question containing the model's image token (``<image>``) made the processor count one image too
many mid-run. Each limit here is one clear :class:`SampleError` naming the sample instead.

- paths (images, masks) must resolve, symlinks followed, inside the dataset's folder, unless
  ``allow_outside_root`` (``--allow-outside-root``) is given for datasets that share an image
  folder;
- question + hint + options: at most :data:`MAX_TEXT_CHARS` characters (the model's context in
  tokens is checked once the model is loaded, see ``benchc.suite.inputs``);
- images: at most :data:`MAX_PIXELS` pixels (read from the header, never decoded beyond it) and
  a shorter side of at least :data:`MIN_SOURCE_SIDE` px; after resizing to the run's image size
  the shorter side must still be ``images.MIN_SIDE`` (see :func:`check_for_image_size`);
- no image/video placeholder token of a known VLM family in any text field.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

from benchc.data.errors import Location, SampleError
from benchc.data.images import MIN_SIDE

#: Question + hint + all options, in characters.
MAX_TEXT_CHARS = 16_000
#: Image pixels (width x height): 64 MP.
MAX_PIXELS = 64_000_000
#: Image file size: 64 MP of uncompressed RGB is 192 MB; no encoded image needs more.
MAX_IMAGE_BYTES = 256 * 2**20
#: Shorter side of the image as stored.
MIN_SOURCE_SIDE = 8

#: Placeholder tokens of common VLM processors; in a question they make the processor see one
#: more image than the sample has. Matched case-sensitively, as tokenizers do.
IMAGE_TOKENS = (
    "<image>",
    "<|image|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<fake_token_around_image>",
    "<global-img>",
    "<image_soft_token>",
    "<start_of_image>",
    "<end_of_image>",
    "<IMG_CONTEXT>",
    "<img>",
    "</img>",
    "[IMG]",
    "<video>",
)
_IMAGE_TOKEN_RE = re.compile("|".join(re.escape(t) for t in IMAGE_TOKENS))


def resolve_inside(
    root: Path, rel: str, loc: Location, *, what: str, allow_outside_root: bool = False
) -> Path:
    """``root / rel`` with symlinks resolved; a :class:`SampleError` when it leaves ``root``."""
    path = root / rel
    if allow_outside_root:
        return path
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(path))
    if Path(rel).is_absolute() or not real.is_relative_to(real_root):
        raise SampleError(
            "path_outside_root",
            loc,
            f"{what} path {rel!r} resolves to {str(real)!r}, outside the dataset folder "
            f"{str(real_root)!r} (pass --allow-outside-root if the dataset shares an image "
            "folder on purpose)",
        )
    return path


def check_text_limits(fields: Iterable[tuple[str, str]], loc: Location) -> None:
    """Total length of ``(name, text)`` fields, and no image placeholder token in any."""
    fields = list(fields)
    for name, text in fields:
        m = _IMAGE_TOKEN_RE.search(text)
        if m:
            raise SampleError(
                "image_token_in_text",
                loc,
                f"field {name!r} contains the image placeholder token {m.group(0)!r} at "
                f"character {m.start()}; the processor would count an extra image",
            )
    total = sum(len(text) for _, text in fields)
    if total > MAX_TEXT_CHARS:
        longest = max(fields, key=lambda f: len(f[1]))[0]
        raise SampleError(
            "text_too_long",
            loc,
            f"question, hint and options hold {total} characters, above the limit of "
            f"{MAX_TEXT_CHARS} (longest field: {longest!r})",
        )


def check_image_dims(width: int, height: int, loc: Location) -> None:
    """Pixel cap and minimum side of the stored image (from its header)."""
    if width * height > MAX_PIXELS:
        raise SampleError(
            "image_too_large",
            loc,
            f"image is {width}x{height} = {width * height / 1e6:.0f} MP, above the "
            f"{MAX_PIXELS / 1e6:.0f} MP limit",
        )
    if min(width, height) < MIN_SOURCE_SIDE:
        raise SampleError(
            "image_too_small",
            loc,
            f"image is {width}x{height} px; its shorter side is below the {MIN_SOURCE_SIDE} px "
            "minimum",
        )


def resized_dims(width: int, height: int, size: int | None) -> tuple[int, int]:
    """(W, H) after ``images.resize_longer`` to ``size`` (same rounding)."""
    if size is None or max(width, height) == size:
        return width, height
    scale = size / max(width, height)
    return max(1, round(width * scale)), max(1, round(height * scale))


def check_for_image_size(width: int, height: int, size: int | None, loc: Location) -> None:
    """The image still has ``MIN_SIDE`` px on its shorter side after resizing to ``size``."""
    w, h = resized_dims(width, height, size)
    if min(w, h) < MIN_SIDE:
        at = "its native size" if size is None else f"--image-size {size}"
        raise SampleError(
            "image_too_thin",
            loc,
            f"image {width}x{height} becomes {w}x{h} px at {at}, below the {MIN_SIDE} px "
            "minimum side the corruptions need",
        )


def read_image_file(
    path: Path, loc: Location, *, what: str = "image", kind: str = "missing_image"
) -> bytes:
    """A regular file's bytes, refusing one larger than any allowed image could be.

    ``what`` names the file in messages; ``kind`` is the error kind of a missing one.
    """
    try:
        if not path.is_file():
            if path.exists():
                raise SampleError(kind, loc, f"{what} path {str(path)!r} is not a file")
            raise FileNotFoundError(path)
        size = path.stat().st_size
        if size > MAX_IMAGE_BYTES:
            raise SampleError(
                "image_too_large",
                loc,
                f"{what} file {str(path)!r} is {size / 2**20:.0f} MiB, above the "
                f"{MAX_IMAGE_BYTES / 2**20:.0f} MiB limit",
            )
        return path.read_bytes()
    except FileNotFoundError:
        raise SampleError(kind, loc, f"{what} file {str(path)!r} not found") from None
    except OSError as exc:
        raise SampleError(kind, loc, f"{what} file {str(path)!r}: {exc}") from None
