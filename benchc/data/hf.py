"""Hugging Face datasets: a ``save_to_disk`` folder, a Hub dataset id, or a Hub-style folder of
parquet files, all read through ``datasets`` (optional: ``benchc[hf]``).

Columns looked up (first match wins), each overridable with ``columns`` (``--dataset-args``):
id = ``id`` | ``index`` | ``question_id`` | ``sample_id`` (else the row number); image =
``image`` (an ``Image`` feature, read undecoded so the original bytes are kept, or raw bytes);
``question``; options = ``options`` | ``choices`` (a list) or letter columns ``A``..``Z``;
answer = ``answer`` | ``answer_index`` | ``label`` (letter or 0-based index); optional
``category``, ``hint``, ``l2-category``, ``region``. A ``DatasetDict`` must hold one split, or
``split`` must name one. docs/guides/datasets.md is the user guide.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
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
#: The fields ``columns`` may map (``--dataset-args question=prompt,options=A|B|C|D``).
FIELDS = ("id", "image", "question", "options", "answer", *META_COLUMNS)
#: ``org/name``, optionally ``:config`` and ``:config:split`` (Hub repository id rules).
HUB_ID = re.compile(
    r"^(?P<repo>[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*)(?::(?P<config>[\w.-]*))?"
    r"(?::(?P<split>[\w.\[\]%:-]+))?$"
)


def _datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise ValueError(
            "loading a Hugging Face dataset needs the optional dependency "
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


def is_hub_folder(path: Path) -> bool:
    """True for a folder laid out like a Hub dataset repository: parquet files at the top or
    under ``data/`` (what ``datasets.load_dataset`` reads from a local clone)."""
    return path.is_dir() and (
        any(path.glob("*.parquet")) or any((path / "data").glob("**/*.parquet"))
    )


def parse_hub_spec(text: str) -> tuple[str, str | None, str | None] | None:
    """``org/name[:config[:split]]`` -> (repo or folder, config, split); None when ``text``
    is neither a Hub id nor an existing folder with that suffix. An empty config means the
    default one (``org/name::test``)."""
    head, *rest = str(text).split(":")
    if Path(head).is_dir() and len(rest) <= 2:
        repo = head
    else:
        m = HUB_ID.match(str(text))
        if m is None or Path(text).exists():
            return None
        repo, rest = m["repo"], [m["config"] or "", m["split"] or ""][: len(rest)]
    config = rest[0] if rest and rest[0] else None
    split = rest[1] if len(rest) > 1 and rest[1] else None
    return repo, config, split


def parse_columns(text: str | None) -> dict[str, str]:
    """``--dataset-args``: ``field=column,...`` for the fields of :data:`FIELDS` (``options``
    may name several columns, ``options=A|B|C|D``); a bad pair is one error naming it."""
    out: dict[str, str] = {}
    for item in (t.strip() for t in (text or "").split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"expected field=column, got {item!r}")
        if key not in FIELDS:
            raise ValueError(f"unknown field {key!r} in {item!r}; fields: {', '.join(FIELDS)}")
        out[key] = value
    return out


def _pick(ds: Any, source: str, split: str | None) -> tuple[Any, str | None]:
    """One split of a ``Dataset`` / ``DatasetDict``."""
    ds_mod = _datasets()
    if isinstance(ds, ds_mod.DatasetDict):
        splits = list(ds)
        if split is None and len(splits) != 1:
            raise ValueError(f"{source}: holds splits {splits}; choose one with split=...")
        split = split or splits[0]
        if split not in ds:
            raise ValueError(f"{source}: no split {split!r} (has {splits})")
        ds = ds[split]
    return ds, split


def load_hf(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    split: str | None = None,
    allow_outside_root: bool = False,
    columns: Mapping[str, str] | None = None,
) -> Dataset:
    """Load a ``save_to_disk`` folder; bad rows raise (or, lenient, are skipped) by row and id.

    Image file paths must stay inside the folder unless ``allow_outside_root``.
    """
    path = Path(path)
    ds, split = _pick(_datasets().load_from_disk(str(path)), str(path), split)
    where = f"{path}[{split}]" if split else str(path)
    return _rows(ds, where, path, name or path.name, lenient, allow_outside_root, columns)


def load_parquet(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
    columns: Mapping[str, str] | None = None,
) -> Dataset:
    """One ``.parquet`` file (``Dataset.to_parquet``, or a table pandas wrote), read in memory
    through ``datasets``; bad rows raise (or, lenient, are skipped) by row and id."""
    path = Path(path)
    try:
        ds = _datasets().Dataset.from_parquet(str(path), keep_in_memory=True)
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"{path}: cannot read the parquet file ({why})") from None
    label = name or path.stem
    return _rows(ds, str(path), path.parent, label, lenient, allow_outside_root, columns)


def load_hub(
    spec: str,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
    columns: Mapping[str, str] | None = None,
) -> Dataset:
    """``org/name[:config[:split]]`` (or a Hub-style local folder, same suffixes) through
    ``datasets.load_dataset``; the Hub's own settings apply (``HF_TOKEN``, ``HF_HUB_OFFLINE``,
    ``HF_DATASETS_CACHE``). Without a split, the dataset must have exactly one."""
    parsed = parse_hub_spec(spec)
    if parsed is None:
        raise ValueError(f"{spec!r} is not a Hub dataset id (org/name[:config[:split]])")
    repo, config, split = parsed
    ds_mod = _datasets()
    try:
        ds = ds_mod.load_dataset(repo, config, split=split)
    except Exception as exc:
        raise ValueError(
            f"datasets.load_dataset({repo!r}, {config!r}, split={split!r}) failed: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    ds, split = _pick(ds, repo, split)
    where = f"{repo}" + (f":{config}" if config else "") + (f"[{split}]" if split else "")
    folder = Path(repo) if Path(repo).is_dir() else Path.cwd()
    label = name or Path(repo).name + (f"-{config}" if config else "") + (
        f"-{split}" if split else ""
    )
    return _rows(ds, where, folder, label, lenient, allow_outside_root, columns)


def resolve_columns(cols: list[str], columns: Mapping[str, str] | None, where: str) -> dict:
    """Which column feeds each field; every column ``columns`` names must exist, and the
    required fields must be found: all the problems in one error naming them."""
    columns = dict(columns or {})
    have = set(cols)
    missing = []
    for field, column in columns.items():
        for c in column.split("|") if field == "options" else [column]:
            if c not in have:
                missing.append(f"{field}={c!r}")
    if missing:
        raise ValueError(
            f"{where}: --dataset-args names columns the dataset does not have: "
            f"{', '.join(missing)} (it has {sorted(have)})"
        )

    def first(field: str, candidates: tuple[str, ...]) -> str | None:
        if field in columns:
            return columns[field]
        return next((c for c in candidates if c in have), None)

    out = {
        "id": first("id", ID_COLUMNS),
        "image": first("image", ("image",)),
        "question": first("question", ("question",)),
        "answer": first("answer", ANSWER_COLUMNS),
        "meta": {k: first(k, (k,)) for k in META_COLUMNS if first(k, (k,)) is not None},
    }
    if "options" in columns and "|" in columns["options"]:
        out["options"], out["letters"] = None, columns["options"].split("|")
    else:
        out["options"] = first("options", OPTION_COLUMNS)
        out["letters"] = [c for c in LETTERS if c in have] if out["options"] is None else []
    absent = [f for f in ("image", "question", "answer") if out[f] is None]
    if out["options"] is None and not out["letters"]:
        absent.append("options")
    if absent:
        looked = {"image": "image", "question": "question", "answer": "|".join(ANSWER_COLUMNS),
                  "options": "|".join(OPTION_COLUMNS) + " or A..Z"}  # fmt: skip
        raise ValueError(
            f"{where}: no column for {', '.join(f'{f} (looked for {looked[f]})' for f in absent)}"
            f"; name them with --dataset-args {absent[0]}=<column> (it has {sorted(have)})"
        )
    return out


def _rows(
    ds: Any,
    where: str,
    folder: Path,
    name: str,
    lenient: bool,
    allow_outside_root: bool,
    columns: Mapping[str, str] | None,
) -> Dataset:
    """The validated samples of one ``datasets.Dataset`` split."""
    ds_mod = _datasets()
    cmap = resolve_columns(list(ds.column_names), columns, where)
    image_col = cmap["image"]
    if isinstance(ds.features[image_col], ds_mod.Image):
        ds = ds.cast_column(image_col, ds_mod.Image(decode=False))
    col = Collector(lenient=lenient)
    for row_no, row in enumerate(ds):
        sid = row[cmap["id"]] if cmap["id"] else str(row_no)
        loc = Location(where, row_no, None if sid is None else str(sid), unit="row")
        try:
            image_bytes = _image_bytes(row[image_col], folder, loc, allow_outside_root)
        except SampleError as err:
            col.reject(err)
            continue
        if cmap["options"]:
            options = row[cmap["options"]]
        else:
            options = [row[c] for c in cmap["letters"] if row[c] not in (None, "")]
        meta = {k: row[c] for k, c in cmap["meta"].items() if row[c] is not None}
        if isinstance(meta.get("region"), str):  # a table converted from TSV: JSON text
            meta["region"] = _json_region(meta["region"])
        col.add(
            loc,
            id=sid,
            image_bytes=image_bytes,
            question=row[cmap["question"]],
            options=list(options) if isinstance(options, (list, tuple)) else options,
            answer=row[cmap["answer"]],
            meta=meta,
        )
    return col.dataset(name, where)


def _json_region(text: str) -> Any:
    import json

    try:
        return json.loads(text) if text.strip() else None
    except ValueError:
        return text  # the sample's check names it


def _image_bytes(value: Any, folder: Path, loc: Location, allow_outside_root: bool) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str) and value.strip():  # a table converted from a VLMEvalKit TSV
        from benchc.data.tsv import REF_MAX_LEN, decode_base64

        if len(value.strip()) > REF_MAX_LEN:
            return decode_base64(value.strip(), loc)
        p = resolve_inside(folder, value.strip(), loc, what="image",
                           allow_outside_root=allow_outside_root)  # fmt: skip
        return read_image_file(p, loc)
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
    """Write samples with ``save_to_disk`` (image bytes kept; options as a list; letter answer;
    a ``region`` column when a sample has a box)."""
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
    if any(isinstance(s.region, tuple) for s in samples):  # boxes (a mask has no column form)
        features["region"] = getattr(ds_mod, "List", ds_mod.Sequence)(ds_mod.Value("int64"))
        data["region"] = [list(s.region) if isinstance(s.region, tuple) else None for s in samples]
    ds_mod.Dataset.from_dict(data, features=features).save_to_disk(str(path))
    return Path(path)
