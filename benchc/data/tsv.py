"""VLMEvalKit-style TSV (MMBench, SEED-Bench2-Plus, MMStar, R-Bench, ...).

Columns: ``index`` (sample id), ``image`` (base64; a value of <= 64 characters is the ``index``
of another row whose image it shares, as VLMEvalKit does), or ``image_path`` (relative to the TSV
folder), ``question``, option columns ``A``..``Z`` (empty / NaN for missing ones; given options
must be contiguous from ``A``), ``answer`` (a letter), ``category``, and optional ``hint``,
``l2-category``, ``split``. Missing values are the empty string and pandas' ``nan``/``NaN``/
``NA``/``N/A``/``null``/``NULL``/``<NA>`` spellings (not ``None``, a legitimate option text).
An optional ``region`` column holds a JSON box ``[x0, y0, x1, y1]`` (benchc's own extension).
"""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
import sys
from collections.abc import Iterable
from pathlib import Path

from benchc.data.errors import Location, SampleError
from benchc.data.limits import MAX_IMAGE_BYTES, read_image_file, resolve_inside
from benchc.data.sample import Dataset, Sample
from benchc.data.validate import Collector, check_text
from benchc.spec import LETTERS

MISSING = frozenset({"", "nan", "NaN", "NA", "N/A", "null", "NULL", "<NA>"})
#: VLMEvalKit: an ``image`` cell this short is a reference to another row's ``index``.
REF_MAX_LEN = 64
META_COLUMNS = ("category", "l2-category", "hint", "split")


def _missing(value: str | None) -> bool:
    return value is None or value.strip() in MISSING


def load_tsv(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
) -> Dataset:
    """Load a VLMEvalKit TSV; bad rows raise (or, lenient, are skipped) naming file/line/id.

    ``image_path`` values must stay inside the TSV's folder unless ``allow_outside_root``.
    """
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError as exc:
        raise ValueError(f"{path}: cannot read dataset file ({exc})") from None
    text = text.removeprefix("\ufeff")  # a UTF-8 byte-order mark (Excel writes one)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # base64 images exceed the 128 kB default
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    header = next(reader, None)
    if not header:
        raise ValueError(f"{path}: empty TSV file")
    cols = {name.strip(): i for i, name in enumerate(header)}
    for required in ("index", "question", "answer"):
        if required not in cols:
            raise ValueError(
                f"{path}: TSV header lacks the {required!r} column (has {sorted(cols)})"
            )
    if "image" not in cols and "image_path" not in cols:
        raise ValueError(f"{path}: TSV header has neither an 'image' nor an 'image_path' column")
    letters = [c for c in LETTERS if c in cols]
    if not letters:
        raise ValueError(f"{path}: TSV header has no option columns 'A'..'Z'")

    rows: list[tuple[int, dict[str, str], int]] = []
    start = 2
    for row in reader:
        line = start
        start = reader.line_num + 1
        if not any(cell.strip() for cell in row):
            continue
        rec = {c: (row[i] if i < len(row) else "") for c, i in cols.items()}
        rows.append((line, rec, len(row)))

    images = {rec["index"].strip(): rec.get("image", "") for _, rec, _ in rows}
    col = Collector(lenient=lenient)
    for line, rec, n_cells in rows:
        sid = rec["index"].strip()
        loc = Location(str(path), line, sid or None)
        try:
            if not sid:
                raise SampleError("bad_record", loc, "empty 'index'")
            if n_cells < len(header):
                raise SampleError(
                    "bad_record",
                    loc,
                    f"row has {n_cells} of the header's {len(header)} columns (truncated "
                    f"row?); missing {[h for h in header[n_cells:]]}",
                )
            image_bytes = _image(rec, images, path.parent, loc, allow_outside_root)
            options = _options(rec, letters, loc)
            meta: dict[str, object] = {"source": path.stem}
            for key in META_COLUMNS:
                if key in rec and not _missing(rec[key]):
                    meta[key] = check_text(rec[key], key, loc)
            if "region" in rec and not _missing(rec["region"]):
                try:
                    meta["region"] = json.loads(rec["region"])
                except json.JSONDecodeError:
                    raise SampleError(
                        "bad_region", loc, f"region {rec['region']!r} is not JSON"
                    ) from None
            answer = rec["answer"].strip()
            if _missing(answer):
                raise SampleError("bad_answer", loc, "no answer given (a test split?)")
        except SampleError as err:
            col.reject(err)
            continue
        col.add(
            loc,
            id=sid,
            image_bytes=image_bytes,
            question=rec["question"],
            options=options,
            answer=answer,
            meta=meta,
        )
    return col.dataset(name or path.stem, str(path))


def _options(rec: dict[str, str], letters: list[str], loc: Location) -> list[str]:
    given = [(c, rec[c]) for c in letters if not _missing(rec[c])]
    for i, (c, _) in enumerate(given):
        if c != LETTERS[i]:
            raise SampleError(
                "bad_record", loc, f"option {LETTERS[i]} is empty but option {c} is given"
            )
    return [v for _, v in given]


def _image(
    rec: dict[str, str],
    images: dict[str, str],
    folder: Path,
    loc: Location,
    allow_outside_root: bool,
) -> bytes:
    value = rec.get("image", "")
    if _missing(value):
        rel = rec.get("image_path", "")
        if _missing(rel):
            raise SampleError("missing_image", loc, "neither 'image' nor 'image_path' is given")
        p = resolve_inside(
            folder, rel.strip(), loc, what="image", allow_outside_root=allow_outside_root
        )
        return read_image_file(p, loc)
    value = value.strip()
    if value.startswith("["):
        raise SampleError("bad_record", loc, "multi-image samples are not supported")
    if len(value) <= REF_MAX_LEN:
        target = images.get(value)
        if target is None or _missing(target) or len(target.strip()) <= REF_MAX_LEN:
            raise SampleError(
                "missing_image", loc, f"image refers to row index {value!r}, which has no image"
            )
        value = target.strip()
    return decode_base64(value, loc)


def decode_base64(value: str, loc: Location) -> bytes:
    """A base64 image cell (VLMEvalKit's layout, also in tables converted from it)."""
    if len(value) * 3 // 4 > MAX_IMAGE_BYTES:
        raise SampleError(
            "image_too_large",
            loc,
            f"base64 image holds ~{len(value) * 3 // 4 / 2**20:.0f} MiB, above the "
            f"{MAX_IMAGE_BYTES / 2**20:.0f} MiB limit",
        )
    try:
        return base64.b64decode(value.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise SampleError("undecodable_image", loc, f"image is not valid base64 ({exc})") from None


def save_tsv(samples: Iterable[Sample], path: str | Path) -> Path:
    """Write samples as a VLMEvalKit TSV (base64 images, option columns up to the largest K)."""
    samples = list(samples)
    path = Path(path)
    kmax = max((s.k for s in samples), default=2)
    has_region = any(isinstance(s.region, tuple) for s in samples)
    header = ["index", "image", "question", "hint", *LETTERS[:kmax], "answer", "category"]
    header += ["l2-category"] + (["region"] if has_region else [])
    buf = io.StringIO(newline="")
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    # QUOTE_MINIMAL does not quote a lone "\r", which readers take for a line end
    w_all = csv.writer(buf, delimiter="\t", lineterminator="\n", quoting=csv.QUOTE_ALL)
    w.writerow(header)
    for s in samples:
        opts = list(s.options) + [""] * (kmax - s.k)
        row = [s.id, base64.b64encode(s.image_bytes).decode("ascii"), s.question]
        row += [s.meta.get("hint") or "", *opts, s.answer_letter, s.meta.get("category") or ""]
        row += [s.meta.get("l2-category") or ""]
        if has_region:
            region = s.region
            row.append(json.dumps([int(v) for v in region]) if isinstance(region, tuple) else "")
        (w_all if any("\r" in cell for cell in row) else w).writerow(row)
    path.write_text(buf.getvalue(), encoding="utf-8", newline="")
    return path
