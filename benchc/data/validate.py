"""Turning raw records into validated :class:`Sample` objects, strictly or leniently.

Every loader funnels its records through :func:`build_sample` and a :class:`Collector`, so the
checks (and their error messages, which name file, line and sample id) are written once.
Strict mode raises the first :class:`SampleError`; lenient mode (``--lenient``) skips the bad
record and records ``"<file>:<line>" -> "<kind>: <message>"`` in ``Dataset.skipped``.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np
from PIL import Image

from benchc.data.errors import Location, SampleError
from benchc.data.fingerprint import fingerprint
from benchc.data.limits import check_image_dims, check_text_limits
from benchc.data.sample import Dataset, Sample
from benchc.spec import LETTERS, MAX_OPTIONS, MIN_OPTIONS

_SURROGATE = re.compile("[\udc80-\udcff]")


def check_text(value: Any, field: str, loc: Location, *, allow_empty: bool = False) -> str:
    """A text field: must be a str without undecodable bytes (surrogate-escaped)."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SampleError("non_utf8", loc, f"field {field!r} is not UTF-8 ({exc})") from None
    if not isinstance(value, str):
        raise SampleError("bad_record", loc, f"field {field!r} must be text, got {value!r}")
    if _SURROGATE.search(value):
        raise SampleError("non_utf8", loc, f"field {field!r} contains bytes that are not UTF-8")
    if not allow_empty and not value.strip():
        kind = "empty_question" if field == "question" else "bad_record"
        raise SampleError(kind, loc, f"field {field!r} is empty")
    return value


def parse_answer(value: Any, k: int, loc: Location) -> int:
    """An answer given as a letter ("B") or a 0-based index; must be < K."""
    if isinstance(value, (bool, np.bool_)):
        raise SampleError("bad_answer", loc, f"answer {value!r} is neither a letter nor an index")
    if isinstance(value, (int, np.integer)):
        idx, shown = int(value), f"index {int(value)}"
    elif isinstance(value, float) and not math.isnan(value) and value.is_integer():
        idx, shown = int(value), f"index {int(value)}"
    elif isinstance(value, str) and len(value.strip()) == 1 and value.strip() in LETTERS:
        idx = LETTERS.index(value.strip())
        shown = f"{value.strip()!r}"
    else:
        raise SampleError(
            "bad_answer", loc, f"answer {value!r} is neither a letter A-Z nor a 0-based index"
        )
    if not 0 <= idx < k:
        valid = f"A-{LETTERS[k - 1]} or 0-{k - 1}"
        raise SampleError(
            "answer_out_of_range",
            loc,
            f"answer {shown} is out of range for {k} options ({valid})",
        )
    return idx


def image_size(data: bytes, loc: Location) -> tuple[int, int]:
    """Check the header against the size limits, then fully decode the image (truncated files
    fail here, not mid-run); return (W, H). An oversized image is never decoded."""
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                check_image_dims(*img.size, loc)
                img.load()
                return img.size
    except SampleError:
        raise
    except Image.DecompressionBombError as exc:
        raise SampleError("image_too_large", loc, f"image is too large to decode ({exc})") from None
    except Image.UnidentifiedImageError:
        head = data[:8]
        raise SampleError(
            "undecodable_image",
            loc,
            f"image cannot be decoded: not a known image format ({len(data)} bytes, "
            f"starting {head!r})",
        ) from None
    except Exception as exc:  # PIL raises many types for bad files
        raise SampleError("undecodable_image", loc, f"image cannot be decoded ({exc})") from None


def check_region(region: Any, width: int, height: int, loc: Location) -> Any:
    """A box (x0, y0, x1, y1) inside the image with x0 < x1, y0 < y1, or an (H, W) mask."""
    if region is None:
        return None
    if isinstance(region, np.ndarray):
        if region.shape != (height, width):
            raise SampleError(
                "bad_region", loc, f"mask shape {region.shape} != image (H, W) {(height, width)}"
            )
        return region.astype(bool)
    try:
        box = tuple(int(v) for v in region)
        ok = len(box) == 4 and all(float(v) == int(v) for v in region)
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise SampleError("bad_region", loc, f"region {region!r} is not a box [x0, y0, x1, y1]")
    x0, y0, x1, y1 = box
    if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
        raise SampleError(
            "bad_region", loc, f"region {box} is empty or outside the {width}x{height} image"
        )
    return box


def build_sample(
    loc: Location,
    *,
    id: Any,
    image_bytes: bytes | None,
    question: Any,
    options: Any,
    answer: Any,
    meta: Mapping[str, Any] | None = None,
) -> Sample:
    """Validate raw fields (in the order a user would fix them) and build a :class:`Sample`."""
    if id is None or (isinstance(id, float) and math.isnan(id)):
        raise SampleError("bad_record", loc, "sample has no id")
    sid = check_text(id if isinstance(id, (str, bytes)) else str(id), "id", loc)
    loc = Location(loc.file, loc.line, sid, loc.unit)
    q = check_text(question, "question", loc)
    if not isinstance(options, (list, tuple)):
        raise SampleError("bad_record", loc, f"options must be a list, got {options!r}")
    if not MIN_OPTIONS <= len(options) <= MAX_OPTIONS:
        raise SampleError(
            "bad_option_count",
            loc,
            f"{len(options)} options; K must be between {MIN_OPTIONS} and {MAX_OPTIONS}",
        )
    opts = tuple(check_text(o, f"option {LETTERS[i]}", loc) for i, o in enumerate(options))
    ans = parse_answer(answer, len(opts), loc)
    hint = (meta or {}).get("hint")
    check_text_limits(
        [("question", q)]
        + ([("hint", hint)] if isinstance(hint, str) else [])
        + [(f"option {LETTERS[i]}", o) for i, o in enumerate(opts)],
        loc,
    )
    if image_bytes is None or len(image_bytes) == 0:
        raise SampleError("missing_image", loc, "sample has no image data")
    w, h = image_size(image_bytes, loc)
    meta = dict(meta or {})
    for key in ("category", "hint", "source"):
        if meta.get(key) is not None:
            meta[key] = check_text(meta[key], key, loc, allow_empty=True)
    if meta.get("region") is not None:
        meta["region"] = check_region(meta["region"], w, h, loc)
    return Sample(id=sid, image_bytes=image_bytes, question=q, options=opts, answer=ans, meta=meta)


class Collector:
    """Accumulates samples; rejects duplicate ids; strict raises, lenient records and skips."""

    def __init__(self, *, lenient: bool) -> None:
        self.lenient = lenient
        self.samples: list[Sample] = []
        self.skipped: dict[str, str] = {}
        self._first_seen: dict[str, Location] = {}

    def reject(self, err: SampleError) -> None:
        if not self.lenient:
            raise err
        self.skipped[err.location.key()] = f"{err.kind}: {err}"

    def add(self, loc: Location, **fields: Any) -> None:
        """Build a sample from raw ``fields`` (see :func:`build_sample`) and keep it if valid."""
        try:
            sample = build_sample(loc, **fields)
            if sample.id in self._first_seen:
                first = self._first_seen[sample.id]
                raise SampleError(
                    "duplicate_id",
                    Location(loc.file, loc.line, sample.id, loc.unit),
                    f"id already used at {first.key()}",
                )
        except SampleError as err:
            self.reject(err)
            return
        self._first_seen[sample.id] = loc
        self.samples.append(sample)

    def dataset(self, name: str, source: str) -> Dataset:
        if not self.samples:
            detail = f"; skipped {len(self.skipped)}: {skip_summary(self.skipped)}"
            raise ValueError(f"{source}: no valid samples" + (detail if self.skipped else ""))
        return Dataset(
            name=name,
            samples=tuple(self.samples),
            fingerprint=fingerprint(self.samples),
            skipped=dict(self.skipped),
            source=source,
        )


def skip_summary(skipped: Mapping[str, str]) -> dict[str, int]:
    """Counts of skipped records per error kind, e.g. ``{"missing_image": 2}``."""
    return dict(Counter(reason.split(":", 1)[0] for reason in skipped.values()))
