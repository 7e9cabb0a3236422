"""The native format: one JSONL file plus an image folder (what ``fixtures/testbed/`` uses).

One line per sample::

    {"id": "q1", "image": "images/q1.png", "question": "...", "options": ["a", "b", "c"],
     "answer": "B", "meta": {"category": "count", "region": [x0, y0, x1, y1]}}

``image`` is relative to the JSONL file's folder; ``answer`` is a letter or a 0-based index;
``meta.region`` is a box or ``{"mask": "masks/q1.png"}`` (non-zero pixels = inside). Top-level
``category`` / ``hint`` are accepted and moved into ``meta``. Images are kept as their file
bytes (not re-encoded), so the fingerprint tracks the files on disk.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from benchc.data.errors import Location, SampleError
from benchc.data.limits import check_image_dims, read_image_file, resolve_inside
from benchc.data.sample import Dataset, Sample
from benchc.data.validate import Collector

DEFAULT_JSONL = "samples.jsonl"


def _read_mask(folder: Path, rel: Any, loc: Location, allow_outside_root: bool) -> np.ndarray:
    if not isinstance(rel, str) or not rel:
        raise SampleError("bad_region", loc, f"region mask path {rel!r} is not a file name")
    path = resolve_inside(
        folder, rel, loc, what="region mask", allow_outside_root=allow_outside_root
    )
    data = read_image_file(path, loc, what="region mask", kind="bad_region")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data)) as img:
                check_image_dims(*img.size, loc)
                return np.asarray(img.convert("L")) > 0
    except SampleError:
        raise
    except Exception as exc:
        raise SampleError("bad_region", loc, f"region mask {str(path)!r}: {exc}") from None


def load_jsonl(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
) -> Dataset:
    """Load a native JSONL dataset; every bad line raises (or, lenient, is skipped) by name.

    Image and mask paths must stay inside the JSONL's folder unless ``allow_outside_root``.
    """
    path = Path(path)
    folder = path.parent
    col = Collector(lenient=lenient)
    try:
        raw_lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read dataset file ({exc})") from None
    for lineno, raw in enumerate(raw_lines, start=1):
        if not raw.strip():
            continue
        loc = Location(str(path), lineno)
        try:
            rec = _parse_line(raw, loc)
            sid = rec.get("id")
            loc = Location(str(path), lineno, None if sid is None else str(sid))
            meta = dict(rec.get("meta") or {})
            for key in ("category", "hint"):
                if key in rec and key not in meta:
                    meta[key] = rec[key]
            if isinstance(meta.get("region"), dict):
                mask = meta["region"].get("mask")
                meta["region"] = _read_mask(folder, mask, loc, allow_outside_root)
            image_bytes = _read_image(folder, rec.get("image"), loc, allow_outside_root)
        except SampleError as err:
            col.reject(err)
            continue
        col.add(
            loc,
            id=rec.get("id"),
            image_bytes=image_bytes,
            question=rec.get("question"),
            options=rec.get("options"),
            answer=rec.get("answer"),
            meta=meta,
        )
    return col.dataset(name or folder.name or path.stem, str(path))


def _parse_line(raw: bytes, loc: Location) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        sid = _guess_id(raw)
        loc = Location(loc.file, loc.line, sid)
        raise SampleError("non_utf8", loc, f"line is not UTF-8 ({exc})") from None
    try:
        rec = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SampleError("bad_record", loc, f"not valid JSON ({exc})") from None
    if not isinstance(rec, dict):
        raise SampleError("bad_record", loc, "line is not a JSON object")
    return rec


def _guess_id(raw: bytes) -> str | None:
    try:
        rec = json.loads(raw.decode("utf-8", errors="replace"))
        return None if not isinstance(rec, dict) or rec.get("id") is None else str(rec["id"])
    except json.JSONDecodeError:
        return None


def _read_image(folder: Path, rel: Any, loc: Location, allow_outside_root: bool) -> bytes:
    if not isinstance(rel, str) or not rel:
        raise SampleError("missing_image", loc, "record has no 'image' path")
    path = resolve_inside(folder, rel, loc, what="image", allow_outside_root=allow_outside_root)
    return read_image_file(path, loc)


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _file_stem(sample_id: str, used: set[str]) -> str:
    stem = _UNSAFE.sub("_", sample_id).strip("._") or "sample"
    if stem in used:
        stem = f"{stem}-{hashlib.sha256(sample_id.encode()).hexdigest()[:8]}"
    used.add(stem)
    return stem


def _extension(data: bytes) -> str:
    with Image.open(io.BytesIO(data)) as img:
        fmt = (img.format or "png").lower()
    return {"jpeg": "jpg"}.get(fmt, fmt)


def _json_meta(meta: dict[str, Any], folder: Path, stem: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in meta.items():
        if key == "region" and isinstance(value, np.ndarray):
            rel = f"masks/{stem}.png"
            (folder / "masks").mkdir(exist_ok=True)
            Image.fromarray(value.astype(np.uint8) * 255, mode="L").save(folder / rel)
            out[key] = {"mask": rel}
        elif isinstance(value, tuple):
            out[key] = [v.item() if isinstance(v, np.generic) else v for v in value]
        elif isinstance(value, np.generic):
            out[key] = value.item()
        else:
            out[key] = value
    return out


def save_jsonl(dataset: Dataset | list[Sample], folder: str | Path) -> Path:
    """Write ``folder/samples.jsonl`` + ``folder/images/`` (image bytes written as-is).

    Returns the JSONL path; ``load_jsonl`` of it gives back the same fingerprint.
    """
    folder = Path(folder)
    (folder / "images").mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    lines = []
    for s in dataset:
        stem = _file_stem(s.id, used)
        rel = f"images/{stem}.{_extension(s.image_bytes)}"
        (folder / rel).write_bytes(s.image_bytes)
        rec = {
            "id": s.id,
            "image": rel,
            "question": s.question,
            "options": list(s.options),
            "answer": s.answer_letter,
            "meta": _json_meta(dict(s.meta), folder, stem),
        }
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True))
    out = folder / DEFAULT_JSONL
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
