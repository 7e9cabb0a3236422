"""A Hugging Face ``datasets`` folder written by ``save_to_disk`` (optional: ``benchc[hf]``).

Columns looked up (first match wins): id = ``id`` | ``index`` | ``question_id`` | ``sample_id``
(else the row number); image = ``image`` (an ``Image`` feature, read undecoded so the original
bytes are kept, or raw bytes); ``question``; options = ``options`` | ``choices`` (a list) or
letter columns ``A``..``Z``; answer = ``answer`` | ``answer_index`` | ``label`` (letter or 0-based
index); optional ``category``, ``hint``, ``l2-category``, ``region``. A ``DatasetDict`` must
hold one split, or ``split`` must name one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchc.data.errors import Location, SampleError
from benchc.data.limits import read_image_file, resolve_inside
from benchc.data.sample import Dataset, Sample
from benchc.data.validate import Collector
from benchc.spec import LETTERS

ID_COLUMNS = ("id", "index", "question_id", "sample_id")
OPTION_COLUMNS = ("options", "choices")
ANSWER_COLUMNS = ("answer", "answer_index", "label")
META_COLUMNS = ("category", "hint", "l2-category", "region")


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ValueError(
            "loading a Hugging Face dataset folder needs the optional dependency "
            "'datasets' (pip install 'benchc[hf]')"
        ) from None
    return datasets


def is_hf_folder(path: Path) -> bool:
    """True for a ``save_to_disk`` folder of a Dataset or a DatasetDict."""
    return path.is_dir() and (
        (path / "state.json").is_file()
        or (path / "dataset_dict.json").is_file()
        or (path / "dataset_info.json").is_file()
    )


def load_hf(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    split: str | None = None,
    allow_outside_root: bool = False,
) -> Dataset:
    """Load a ``save_to_disk`` folder; bad rows raise (or, lenient, are skipped) by row and id.

    Image file paths must stay inside the folder unless ``allow_outside_root``.
    """
    ds_mod = _datasets()
    path = Path(path)
    ds = ds_mod.load_from_disk(str(path))
    if isinstance(ds, ds_mod.DatasetDict):
        splits = list(ds)
        if split is None and len(splits) != 1:
            raise ValueError(f"{path}: holds splits {splits}; choose one with split=...")
        split = split or splits[0]
        if split not in ds:
            raise ValueError(f"{path}: no split {split!r} (has {splits})")
        ds = ds[split]
    cols = set(ds.column_names)
    if "image" not in cols:
        raise ValueError(f"{path}: dataset has no 'image' column (has {sorted(cols)})")
    if "question" not in cols:
        raise ValueError(f"{path}: dataset has no 'question' column (has {sorted(cols)})")
    if isinstance(ds.features["image"], ds_mod.Image):
        ds = ds.cast_column("image", ds_mod.Image(decode=False))
    id_col = next((c for c in ID_COLUMNS if c in cols), None)
    opt_col = next((c for c in OPTION_COLUMNS if c in cols), None)
    letter_cols = [c for c in LETTERS if c in cols]
    ans_col = next((c for c in ANSWER_COLUMNS if c in cols), None)
    if opt_col is None and not letter_cols:
        raise ValueError(f"{path}: no 'options'/'choices' column and no 'A'..'Z' columns")
    if ans_col is None:
        raise ValueError(f"{path}: no answer column (one of {ANSWER_COLUMNS})")

    col = Collector(lenient=lenient)
    where = f"{path}[{split}]" if split else str(path)
    for row_no, row in enumerate(ds):
        sid = row[id_col] if id_col else str(row_no)
        loc = Location(where, row_no, None if sid is None else str(sid), unit="row")
        try:
            image_bytes = _image_bytes(row["image"], path, loc, allow_outside_root)
        except SampleError as err:
            col.reject(err)
            continue
        if opt_col:
            options = row[opt_col]
        else:
            options = [row[c] for c in letter_cols if row[c] not in (None, "")]
        meta = {k: row[k] for k in META_COLUMNS if k in cols and row[k] is not None}
        col.add(
            loc,
            id=sid,
            image_bytes=image_bytes,
            question=row["question"],
            options=list(options) if isinstance(options, (list, tuple)) else options,
            answer=row[ans_col],
            meta=meta,
        )
    return col.dataset(name or path.name, where)


def _image_bytes(value: Any, folder: Path, loc: Location, allow_outside_root: bool) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, dict):
        if value.get("bytes"):
            return bytes(value["bytes"])
        if value.get("path"):
            p = resolve_inside(
                folder, str(value["path"]), loc, what="image", allow_outside_root=allow_outside_root
            )
            return read_image_file(p, loc)
    raise SampleError("missing_image", loc, "row has no image data")


def save_hf(samples: list[Sample], path: str | Path) -> Path:
    """Write samples with ``save_to_disk`` (image bytes kept; options as a list; letter answer)."""
    ds_mod = _datasets()
    features = ds_mod.Features(
        {
            "id": ds_mod.Value("string"),
            "image": ds_mod.Image(),
            "question": ds_mod.Value("string"),
            "options": getattr(ds_mod, "List", ds_mod.Sequence)(ds_mod.Value("string")),
            "answer": ds_mod.Value("string"),
            "category": ds_mod.Value("string"),
            "hint": ds_mod.Value("string"),
        }
    )
    data = {
        "id": [s.id for s in samples],
        "image": [{"bytes": s.image_bytes, "path": None} for s in samples],
        "question": [s.question for s in samples],
        "options": [list(s.options) for s in samples],
        "answer": [s.answer_letter for s in samples],
        "category": [s.category for s in samples],
        "hint": [s.hint for s in samples],
    }
    ds_mod.Dataset.from_dict(data, features=features).save_to_disk(str(path))
    return Path(path)
