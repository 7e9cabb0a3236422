"""``--dataset PATH``: pick the loader by what the path holds, the first of :data:`FORMATS`
that detects it:

- a ``.jsonl`` file, or a folder holding ``samples.jsonl`` (or exactly one ``*.jsonl``): native;
- a ``.tsv`` file, or a folder holding exactly one ``*.tsv``: VLMEvalKit TSV;
- a ``.parquet`` file: read through ``datasets`` (optional dependency);
- a folder written by ``datasets.save_to_disk``: Hugging Face (optional dependency);
- a Hub dataset id ``org/name[:config[:split]]``, or a folder laid out like a Hub repository
  (parquet files), with the same suffixes: ``datasets.load_dataset`` (optional dependency).

``columns`` (``--dataset-args``) maps the sample's fields to other column names, for the
``datasets`` formats (docs/guides/datasets.md). Which format holds the samples changes nothing
about them: the fingerprint is their content (:mod:`benchc.data.fingerprint`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from benchc.data.hf import (
    is_hf_folder,
    is_hub_folder,
    load_hf,
    load_hub,
    load_parquet,
    parse_hub_spec,
)
from benchc.data.native import DEFAULT_JSONL, load_jsonl
from benchc.data.sample import Dataset
from benchc.data.tsv import load_tsv


@dataclass(frozen=True)
class Format:
    """One dataset format: ``detect(path)`` gives what ``load`` reads (None: not this format),
    ``load(target, *, lenient, allow_outside_root, name)`` the dataset. ``folder_name``: without
    a ``name`` the folder ``--dataset`` names is the dataset's name (else the loader's own)."""

    name: str
    detect: Callable[[Path], Path | None]
    load: Callable[..., Dataset]
    folder_name: bool = False


def _file(suffix: str) -> Callable[[Path], Path | None]:
    def detect(p: Path) -> Path | None:
        return p if p.is_file() and p.suffix.lower() == suffix else None

    return detect


def _hf_folder(p: Path) -> Path | None:
    return p if is_hf_folder(p) else None


def _native_folder(p: Path) -> Path | None:
    return p / DEFAULT_JSONL if p.is_dir() and (p / DEFAULT_JSONL).is_file() else None


def _only(suffix: str, other: str) -> Callable[[Path], Path | None]:
    """A folder holding exactly one ``*<suffix>`` file and no ``*<other>`` file: that file."""

    def detect(p: Path) -> Path | None:
        if not p.is_dir():
            return None
        mine, theirs = sorted(p.glob(f"*{suffix}")), sorted(p.glob(f"*{other}"))
        return mine[0] if len(mine) == 1 and not theirs else None

    return detect


#: Tried in order; the first whose ``detect`` answers loads. A new format is one entry here.
FORMATS: list[Format] = [
    Format("jsonl", _file(".jsonl"), load_jsonl),
    Format("tsv", _file(".tsv"), load_tsv),
    Format("parquet", _file(".parquet"), load_parquet),
    Format("hf", _hf_folder, load_hf),
    Format("native folder", _native_folder, load_jsonl, folder_name=True),
    Format("jsonl folder", _only(".jsonl", ".tsv"), load_jsonl, folder_name=True),
    Format("tsv folder", _only(".tsv", ".jsonl"), load_tsv),
]


def load_dataset(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
    columns: Mapping[str, str] | None = None,
) -> Dataset:
    """Load any supported dataset; strict by default (the first bad sample raises ValueError).

    ``lenient=True`` skips bad samples and lists them in ``Dataset.skipped``
    (``"<file>:<line>" -> "<kind>: <message>"``; see ``validate.skip_summary``).
    ``allow_outside_root=True`` lets image and mask paths leave the dataset's folder
    (see :mod:`benchc.data.limits`).
    """
    opts = {"lenient": lenient, "allow_outside_root": allow_outside_root}
    p = Path(path)
    hub = parse_hub_spec(str(path)) if not is_hf_folder(p) else None
    if hub is not None and (not p.exists() or is_hub_folder(p)):
        return load_hub(str(path), **opts, name=name, columns=columns)
    if not p.exists():
        raise ValueError(
            f"dataset path {str(p)!r} does not exist (nor is it a Hub id org/name[:config:split])"
        )
    if columns and not (is_hf_folder(p) or _file(".parquet")(p)):
        raise ValueError(
            f"{p}: --dataset-args maps columns of Hugging Face datasets and parquet files only"
        )
    for fmt in FORMATS:
        target = fmt.detect(p)
        if target is not None:
            extra = {"columns": columns} if fmt.name in ("hf", "parquet") else {}
            return fmt.load(
                target, **opts, **extra, name=(name or p.name) if fmt.folder_name else name
            )
    if p.is_file():
        suffix = p.suffix.lower()
        raise ValueError(
            f"{p}: unsupported dataset file type {suffix!r} (expected .jsonl, .tsv or .parquet)"
        )
    jsonls, tsvs = sorted(p.glob("*.jsonl")), sorted(p.glob("*.tsv"))
    found = [f.name for f in (*jsonls, *tsvs)]
    raise ValueError(
        f"{p}: cannot tell the dataset format: expected {DEFAULT_JSONL}, exactly one .jsonl or "
        f".tsv file, or a datasets.save_to_disk folder; found {found or 'none of these'}"
    )
