"""``--dataset PATH``: pick the loader by what the path holds.

- a ``.jsonl`` file, or a folder holding ``samples.jsonl`` (or exactly one ``*.jsonl``): native;
- a ``.tsv`` file, or a folder holding exactly one ``*.tsv``: VLMEvalKit TSV;
- a folder written by ``datasets.save_to_disk``: Hugging Face (optional dependency).
"""

from __future__ import annotations

from pathlib import Path

from benchc.data.hf import is_hf_folder, load_hf
from benchc.data.native import DEFAULT_JSONL, load_jsonl
from benchc.data.sample import Dataset
from benchc.data.tsv import load_tsv


def load_dataset(
    path: str | Path,
    *,
    lenient: bool = False,
    name: str | None = None,
    allow_outside_root: bool = False,
) -> Dataset:
    """Load any supported dataset; strict by default (the first bad sample raises ValueError).

    ``lenient=True`` skips bad samples and lists them in ``Dataset.skipped``
    (``"<file>:<line>" -> "<kind>: <message>"``; see ``validate.skip_summary``).
    ``allow_outside_root=True`` lets image and mask paths leave the dataset's folder
    (see :mod:`benchc.data.limits`).
    """
    opts = {"lenient": lenient, "allow_outside_root": allow_outside_root}
    p = Path(path)
    if not p.exists():
        raise ValueError(f"dataset path {str(p)!r} does not exist")
    if p.is_file():
        suffix = p.suffix.lower()
        if suffix == ".jsonl":
            return load_jsonl(p, **opts, name=name)
        if suffix == ".tsv":
            return load_tsv(p, **opts, name=name)
        raise ValueError(f"{p}: unsupported dataset file type {suffix!r} (expected .jsonl or .tsv)")
    if is_hf_folder(p):
        return load_hf(p, **opts, name=name)
    if (p / DEFAULT_JSONL).is_file():
        return load_jsonl(p / DEFAULT_JSONL, **opts, name=name or p.name)
    jsonls, tsvs = sorted(p.glob("*.jsonl")), sorted(p.glob("*.tsv"))
    if len(jsonls) == 1 and not tsvs:
        return load_jsonl(jsonls[0], **opts, name=name or p.name)
    if len(tsvs) == 1 and not jsonls:
        return load_tsv(tsvs[0], **opts, name=name)
    found = [f.name for f in (*jsonls, *tsvs)]
    raise ValueError(
        f"{p}: cannot tell the dataset format: expected {DEFAULT_JSONL}, exactly one .jsonl or "
        f".tsv file, or a datasets.save_to_disk folder; found {found or 'none of these'}"
    )
