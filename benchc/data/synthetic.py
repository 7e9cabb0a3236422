"""Seeded generator of visual multiple-choice questions whose answers hinge on visual detail.

Why: the default suite needs a testbed that (a) ships with the repository, (b) a ~2 MB VLM
trained on CPU can learn at 64-128 px, and (c) corruptions actually hurt. Every kind below
draws bold, high-contrast content on a fixed 4 x 4 cell grid (one cell = one 16 px patch at a
64 px model input), asks one of a few fixed question templates, and has 4 options drawn from a
small closed vocabulary (:data:`ANSWER_VOCAB`).

Kinds (``meta["category"]``):

- ``count``: 1-7 shapes; "How many shapes are there?"
- ``colour``: 1-3 shapes of distinct types; "What colour is the <shape>?"
- ``position``: a target shape among 0-2 others in different quadrants; "Where is the <shape>?"
- ``text``: a large rendered 3-letter word or 2-digit number; confusable distractors.
- ``chart``: a 4-bar chart on a 0-10 grid; "What is the value of the tallest bar?"
- ``size``: 3 same-type shapes of distinct colours; "What colour is the largest shape?"

Determinism: sample ``i`` is drawn from ``numpy.random.default_rng([seed, i])`` alone, so
``generate(10, s)`` is a prefix of ``generate(100, s)`` and the same seed gives the same pixels
and PNG bytes (PIL drawing without antialiasing randomness, fixed PNG settings). Text uses PIL's
built-in scalable font (``ImageFont.load_default(size=...)``), so no system font is needed.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from benchc.data.sample import Sample

KINDS: tuple[str, ...] = ("count", "colour", "position", "text", "chart", "size")

#: Shape names; label id = index + 1 (0 = empty cell).
SHAPES: tuple[str, ...] = ("circle", "square", "triangle", "diamond", "cross")
#: Colour names and RGB; label id = index + 1 (0 = empty cell).
COLOURS: tuple[str, ...] = ("red", "green", "blue", "yellow", "purple", "orange")
COLOUR_RGB: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 160, 40),
    "blue": (30, 60, 220),
    "yellow": (235, 200, 0),
    "purple": (140, 40, 170),
    "orange": (245, 130, 20),
}
POSITIONS: tuple[str, ...] = ("top left", "top right", "bottom left", "bottom right")
#: Confusable 3-letter words for the ``text`` kind (most differ from another in one letter).
WORDS: tuple[str, ...] = (
    "CAT",
    "CAR",
    "CAB",
    "BAT",
    "BAR",
    "HAT",
    "HAM",
    "MAP",
    "MOP",
    "TOP",
    "TOY",
    "BOX",
    "FOX",
    "SUN",
    "RUN",
    "PEN",
)
NUMBERS: tuple[str, ...] = tuple(str(v) for v in range(10, 100))
COUNTS: tuple[str, ...] = tuple(str(v) for v in range(1, 10))
CHART_VALUES: tuple[str, ...] = tuple(str(v) for v in range(1, 11))

#: Every option string any kind can produce; ``option_ids`` index into it.
ANSWER_VOCAB: tuple[str, ...] = tuple(
    dict.fromkeys((*COUNTS, *CHART_VALUES, *COLOURS, *POSITIONS, *WORDS, *NUMBERS))
)
_VOCAB_ID = {s: i for i, s in enumerate(ANSWER_VOCAB)}

GRID = 4  # cells per side
BACKGROUND = (250, 250, 250)
MIN_SIZE, MAX_SIZE = 64, 512
PNG_COMPRESS_LEVEL = 6


@dataclass
class Item:
    """One generated question before encoding, with training labels.

    ``cell_shape`` / ``cell_colour``: int8 (4, 4) label grids, row-major from the top-left cell,
    0 = empty, else ``SHAPES``/``COLOURS`` index + 1 (only shape kinds fill them; the ``text``
    and ``chart`` kinds leave them at 0). ``count``: shapes drawn. ``value``: the kind's scalar
    target (count, tallest bar value, number/word index, or -1). ``region``: (x0, y0, x1, y1),
    x1/y1 exclusive, of the question-relevant area.
    """

    kind: str
    image: np.ndarray
    question: str
    options: tuple[str, ...]
    answer: int
    region: tuple[int, int, int, int]
    cell_shape: np.ndarray = field(default_factory=lambda: np.zeros((GRID, GRID), np.int8))
    cell_colour: np.ndarray = field(default_factory=lambda: np.zeros((GRID, GRID), np.int8))
    count: int = 0
    value: int = -1


@dataclass
class Arrays:
    """A batch for training scripts: raw pixels plus structured labels (no PNG encoding).

    ``images`` uint8 (n, size, size, 3); ``kind`` int64 (n,) index into :data:`KINDS`;
    ``answer`` int64 (n,) letter index; ``option_ids`` int64 (n, 4) indices into
    :data:`ANSWER_VOCAB`; ``cell_shape`` / ``cell_colour`` int8 (n, 4, 4); ``count`` and
    ``value`` int64 (n,); ``regions`` int64 (n, 4); ``questions`` / ``options`` lists.
    """

    images: np.ndarray
    kind: np.ndarray
    answer: np.ndarray
    option_ids: np.ndarray
    cell_shape: np.ndarray
    cell_colour: np.ndarray
    count: np.ndarray
    value: np.ndarray
    regions: np.ndarray
    questions: list[str]
    options: list[tuple[str, ...]]


# ---------------------------------------------------------------------------------------------
# drawing primitives


def _shape_box(cx: float, cy: float, r: float) -> tuple[int, int, int, int]:
    return (
        int(np.floor(cx - r)),
        int(np.floor(cy - r)),
        int(np.ceil(cx + r)) + 1,
        int(np.ceil(cy + r)) + 1,
    )


def _draw_shape(
    draw: ImageDraw.ImageDraw, shape: str, cx: float, cy: float, r: float, rgb: tuple[int, int, int]
) -> tuple[int, int, int, int]:
    """Draw a filled shape of radius ``r`` centred at (cx, cy); return its box."""
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=rgb)
    elif shape == "square":
        s = r * 0.85
        draw.rectangle((cx - s, cy - s, cx + s, cy + s), fill=rgb)
    elif shape == "triangle":
        draw.polygon([(cx, cy - r), (cx + r, cy + r * 0.8), (cx - r, cy + r * 0.8)], fill=rgb)
    elif shape == "diamond":
        draw.polygon([(cx, cy - r), (cx + r, cy), (cx, cy + r), (cx - r, cy)], fill=rgb)
    elif shape == "cross":
        w = r * 0.38
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=rgb)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=rgb)
    else:  # pragma: no cover - guarded by SHAPES
        raise ValueError(f"unknown shape {shape!r}")
    return _shape_box(cx, cy, r)


def _union(boxes: Sequence[tuple[int, int, int, int]], size: int) -> tuple[int, int, int, int]:
    x0 = max(0, min(b[0] for b in boxes))
    y0 = max(0, min(b[1] for b in boxes))
    x1 = min(size, max(b[2] for b in boxes))
    y1 = min(size, max(b[3] for b in boxes))
    return (int(x0), int(y0), int(x1), int(y1))


@lru_cache(maxsize=8)
def _font(px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=px)


class _Canvas:
    def __init__(self, size: int) -> None:
        self.size = size
        self.cell = size / GRID
        self.img = Image.new("RGB", (size, size), BACKGROUND)
        self.draw = ImageDraw.Draw(self.img)
        self.cell_shape = np.zeros((GRID, GRID), np.int8)
        self.cell_colour = np.zeros((GRID, GRID), np.int8)

    def shape_in_cell(
        self,
        rng: np.random.Generator,
        cell: int,
        shape: str,
        colour: str,
        scale: float | None = None,
    ) -> tuple[int, int, int, int]:
        row, col = divmod(cell, GRID)
        jit = self.cell * 0.08
        cx = (col + 0.5) * self.cell + rng.uniform(-jit, jit)
        cy = (row + 0.5) * self.cell + rng.uniform(-jit, jit)
        r = self.cell * (scale if scale is not None else rng.uniform(0.30, 0.40))
        self.cell_shape[row, col] = SHAPES.index(shape) + 1
        self.cell_colour[row, col] = COLOURS.index(colour) + 1
        box = _draw_shape(self.draw, shape, cx, cy, r, COLOUR_RGB[colour])
        return _union([box], self.img.width)  # a shape at the border: box clipped to the image

    def array(self) -> np.ndarray:
        return np.asarray(self.img, dtype=np.uint8).copy()


# ---------------------------------------------------------------------------------------------
# option construction


def _place(correct: str, distractors: Sequence[str], letter: int) -> tuple[tuple[str, ...], int]:
    """Put ``correct`` at index ``letter`` and fill the other 3 slots with ``distractors``."""
    opts = list(distractors[:3])
    if len(opts) != 3 or correct in opts or len(set(opts)) != 3:
        raise AssertionError(f"bad distractors {opts} for {correct!r}")  # generator bug
    opts.insert(letter, correct)
    return tuple(opts), letter


def _pick_distractors(
    rng: np.random.Generator, correct: str, preferred: Sequence[str], pool: Sequence[str]
) -> list[str]:
    """Three distinct distractors: shuffled ``preferred`` first, then shuffled rest of ``pool``."""
    pref = [p for p in dict.fromkeys(preferred) if p != correct]
    pref = [pref[i] for i in rng.permutation(len(pref))]
    rest = [p for p in pool if p != correct and p not in pref]
    rest = [rest[i] for i in rng.permutation(len(rest))]
    return (pref + rest)[:3]


def _near_numbers(v: int, lo: int, hi: int) -> list[str]:
    near = [v + d for d in (-1, 1, -2, 2, -3, 3) if lo <= v + d <= hi]
    return [str(x) for x in near]


def _confusable(word: str, pool: Sequence[str]) -> list[str]:
    """Pool entries differing from ``word`` in exactly one character position."""
    return [
        w
        for w in pool
        if len(w) == len(word) and sum(a != b for a, b in zip(w, word, strict=True)) == 1
    ]


# ---------------------------------------------------------------------------------------------
# the six kinds


def _count(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    n = int(rng.integers(1, 8))
    cells = rng.choice(GRID * GRID, size=n, replace=False)
    boxes = [
        cv.shape_in_cell(
            rng, int(c), SHAPES[rng.integers(len(SHAPES))], COLOURS[rng.integers(len(COLOURS))]
        )
        for c in cells
    ]
    opts, ans = _place(
        str(n), _pick_distractors(rng, str(n), _near_numbers(n, 1, 9), COUNTS), letter
    )
    return Item(
        "count",
        cv.array(),
        "How many shapes are there?",
        opts,
        ans,
        _union(boxes, size),
        cv.cell_shape,
        cv.cell_colour,
        n,
        n,
    )


def _colour(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    n = int(rng.integers(1, 4))
    shapes = [SHAPES[i] for i in rng.choice(len(SHAPES), size=n, replace=False)]
    colours = [COLOURS[i] for i in rng.choice(len(COLOURS), size=n, replace=False)]
    cells = rng.choice(GRID * GRID, size=n, replace=False)
    boxes = [
        cv.shape_in_cell(rng, int(c), s, col)
        for c, s, col in zip(cells, shapes, colours, strict=True)
    ]
    target = shapes[0]
    correct = colours[0]
    opts, ans = _place(correct, _pick_distractors(rng, correct, colours[1:], COLOURS), letter)
    return Item(
        "colour",
        cv.array(),
        f"What colour is the {target}?",
        opts,
        ans,
        boxes[0],
        cv.cell_shape,
        cv.cell_colour,
        n,
        COLOURS.index(correct),
    )


def _quadrant_cells(q: int) -> list[int]:
    r0, c0 = divmod(q, 2)
    return [(2 * r0 + dr) * GRID + 2 * c0 + dc for dr in (0, 1) for dc in (0, 1)]


def _position(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    n = int(rng.integers(1, 4))
    shapes = [SHAPES[i] for i in rng.choice(len(SHAPES), size=n, replace=False)]
    quads = rng.choice(4, size=n, replace=False)
    boxes = []
    for s, q in zip(shapes, quads, strict=True):
        cell = _quadrant_cells(int(q))[rng.integers(4)]
        boxes.append(cv.shape_in_cell(rng, cell, s, COLOURS[rng.integers(len(COLOURS))]))
    correct = POSITIONS[int(quads[0])]
    opts, ans = _place(correct, _pick_distractors(rng, correct, (), POSITIONS), letter)
    return Item(
        "position",
        cv.array(),
        f"Where is the {shapes[0]}?",
        opts,
        ans,
        boxes[0],
        cv.cell_shape,
        cv.cell_colour,
        n,
        int(quads[0]),
    )


def _text(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    if rng.random() < 0.5:
        pool, question = WORDS, "What word is written in the image?"
    else:
        pool, question = NUMBERS, "What number is written in the image?"
    correct = pool[rng.integers(len(pool))]
    font = _font(round(size * (0.30 if pool is WORDS else 0.38)))
    stroke = max(1, size // 64)
    x0, y0, x1, y1 = cv.draw.textbbox((0, 0), correct, font=font, stroke_width=stroke)
    w, h = x1 - x0, y1 - y0
    ox = rng.integers(2, max(3, size - w - 2)) - x0
    oy = rng.integers(2, max(3, size - h - 2)) - y0
    ink = (20, 20, 20)
    cv.draw.text((ox, oy), correct, font=font, fill=ink, stroke_width=stroke, stroke_fill=ink)
    region = _union([(ox + x0, oy + y0, ox + x1 + 1, oy + y1 + 1)], size)
    opts, ans = _place(
        correct, _pick_distractors(rng, correct, _confusable(correct, pool), pool), letter
    )
    return Item(
        "text",
        cv.array(),
        question,
        opts,
        ans,
        region,
        cv.cell_shape,
        cv.cell_colour,
        0,
        pool.index(correct),
    )


def _chart(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    d = cv.draw
    left, right, top, bottom = size * 0.12, size * 0.95, size * 0.06, size * 0.92
    unit = (bottom - top) / 10
    for v in range(11):  # light grid lines every unit, darker every 5
        y = bottom - v * unit
        d.line((left, y, right, y), fill=(150, 150, 150) if v % 5 == 0 else (215, 215, 215))
    d.line((left, top, left, bottom), fill=(0, 0, 0), width=max(1, size // 128))
    d.line((left, bottom, right, bottom), fill=(0, 0, 0), width=max(1, size // 128))
    tallest = int(rng.integers(2, 11))
    others = rng.integers(1, tallest, size=3)
    values = np.concatenate([[tallest], others])[rng.permutation(4)]
    slot = (right - left) / 4
    rgb = (40, 90, 200)
    boxes = []
    for i, v in enumerate(values):
        bx0 = left + (i + 0.2) * slot
        bx1 = left + (i + 0.8) * slot
        by0 = bottom - float(v) * unit
        d.rectangle((bx0, by0, bx1, bottom), fill=rgb)
        if v == tallest:
            boxes.append(
                _shape_box((bx0 + bx1) / 2, (by0 + bottom) / 2, max(bx1 - bx0, bottom - by0) / 2)
            )
    # region: the tallest bar together with the value axis it is read against
    region = _union([*boxes, (0, int(top), int(left) + 2, int(bottom) + 2)], size)
    correct = str(tallest)
    opts, ans = _place(
        correct,
        _pick_distractors(rng, correct, _near_numbers(tallest, 1, 10), CHART_VALUES),
        letter,
    )
    return Item(
        "chart",
        cv.array(),
        "What is the value of the tallest bar?",
        opts,
        ans,
        region,
        cv.cell_shape,
        cv.cell_colour,
        0,
        tallest,
    )


def _size(rng: np.random.Generator, size: int, letter: int) -> Item:
    cv = _Canvas(size)
    shape = SHAPES[rng.integers(len(SHAPES))]
    colours = [COLOURS[i] for i in rng.choice(len(COLOURS), size=3, replace=False)]
    cells = rng.choice(GRID * GRID, size=3, replace=False)
    big = rng.uniform(0.36, 0.44)
    scales = [big, big * rng.uniform(0.62, 0.82), big * rng.uniform(0.62, 0.82)]
    boxes = [
        cv.shape_in_cell(rng, int(c), shape, col, sc)
        for c, col, sc in zip(cells, colours, scales, strict=True)
    ]
    correct = colours[0]
    opts, ans = _place(correct, _pick_distractors(rng, correct, colours[1:], COLOURS), letter)
    return Item(
        "size",
        cv.array(),
        "What colour is the largest shape?",
        opts,
        ans,
        _union(boxes, size),
        cv.cell_shape,
        cv.cell_colour,
        3,
        COLOURS.index(correct),
    )


_MAKERS = {
    "count": _count,
    "colour": _colour,
    "position": _position,
    "text": _text,
    "chart": _chart,
    "size": _size,
}


# ---------------------------------------------------------------------------------------------
# public API


def _check(n: int, size: int, kinds: Sequence[str]) -> tuple[str, ...]:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not MIN_SIZE <= size <= MAX_SIZE:
        raise ValueError(f"size must be in [{MIN_SIZE}, {MAX_SIZE}] px, got {size}")
    kinds = tuple(kinds)
    bad = [k for k in kinds if k not in _MAKERS]
    if bad or not kinds:
        raise ValueError(f"unknown or empty kinds {bad or kinds!r}; choose from {KINDS}")
    return kinds


def make_item(i: int, seed: int, *, size: int = 128, kinds: Sequence[str] = KINDS) -> Item:
    """Sample ``i`` of the stream for ``seed``: its kind cycles through ``kinds`` and its answer
    letter cycles A-D within each kind, so any 4 x len(kinds) consecutive samples are balanced."""
    kinds = _check(i, size, kinds)
    rng = np.random.default_rng([seed, i])
    kind = kinds[i % len(kinds)]
    letter = (i // len(kinds)) % 4
    return _MAKERS[kind](rng, size, letter)


def generate_items(
    n: int, seed: int, *, size: int = 128, kinds: Sequence[str] = KINDS
) -> list[Item]:
    kinds = _check(n, size, kinds)
    return [make_item(i, seed, size=size, kinds=kinds) for i in range(n)]


def generate_arrays(n: int, seed: int, size: int = 128, *, kinds: Sequence[str] = KINDS) -> Arrays:
    """Many samples quickly as arrays (no PNG encoding), for training; see :class:`Arrays`."""
    items = generate_items(n, seed, size=size, kinds=kinds)
    empty_grid = np.zeros((0, GRID, GRID), np.int8)
    return Arrays(
        images=np.stack([it.image for it in items])
        if items
        else np.zeros((0, size, size, 3), np.uint8),
        kind=np.array([KINDS.index(it.kind) for it in items], np.int64),
        answer=np.array([it.answer for it in items], np.int64),
        option_ids=np.array([[_VOCAB_ID[o] for o in it.options] for it in items], np.int64).reshape(
            -1, 4
        ),
        cell_shape=np.stack([it.cell_shape for it in items]) if items else empty_grid,
        cell_colour=np.stack([it.cell_colour for it in items]) if items else empty_grid,
        count=np.array([it.count for it in items], np.int64),
        value=np.array([it.value for it in items], np.int64),
        regions=np.array([it.region for it in items], np.int64).reshape(-1, 4),
        questions=[it.question for it in items],
        options=[it.options for it in items],
    )


def encode_png(image: np.ndarray) -> bytes:
    """PNG bytes with fixed settings, so equal pixels give equal bytes."""
    buf = io.BytesIO()
    Image.fromarray(image, mode="RGB").save(buf, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buf.getvalue()


def generate(n: int, seed: int, *, size: int = 128, kinds: Sequence[str] = KINDS) -> list[Sample]:
    """``n`` synthetic samples as :class:`Sample` objects with PNG image bytes.

    ids are ``syn<seed>-<i:05d>``; ``meta`` holds ``category``, ``source="synthetic"``,
    ``region`` (x0, y0, x1, y1) and ``seed``.
    """
    return [
        Sample(
            id=f"syn{seed}-{i:05d}",
            image_bytes=encode_png(it.image),
            question=it.question,
            options=it.options,
            answer=it.answer,
            meta={"category": it.kind, "source": "synthetic", "region": it.region, "seed": seed},
        )
        for i, it in enumerate(generate_items(n, seed, size=size, kinds=kinds))
    ]
