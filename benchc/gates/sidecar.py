"""The pickle-free array sidecars of threshold snapshots: ``<folder>/arrays/<digest>.npz``.

Content-addressed: the file name is the digest of the arrays it holds (verified on every load,
so a damaged or hand-edited file is one clear error instead of silently wrong baselines), equal
evidence is stored once, and after a re-record the files no snapshot references any more are
swept from that one baseline folder: only files benchc wrote (listed in the folder's
``baseline.manifest``, or written by this process), never one it did not write.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path

from benchc.gates.evidence import Evidence, EvidenceError, digest_arrays
from benchc.results.store import StoreError, atomic_save_npz, load_npz

ARRAYS = "arrays"
_NAME = re.compile(r"^arrays/[0-9a-f]{20}\.npz$")

#: Evidence of the current run, by digest: the syrupy comparator receives serialised text only.
_CURRENT: dict[str, Evidence] = {}
#: Sidecars this process wrote, by resolved folder: a sweep may delete these (and those the
#: baseline manifest lists), nothing else.
_WRITTEN: dict[Path, set[str]] = {}


def relpath(evidence: Evidence) -> str:
    """The sidecar path of ``evidence``, relative to its snapshot folder."""
    return f"{ARRAYS}/{evidence.digest[:20]}.npz"


def save(folder: Path, evidence: Evidence) -> str:
    """Write ``evidence`` (once; equal content is already there) and return its relative path."""
    rel = relpath(evidence)
    path = Path(folder) / rel
    if not path.is_file():
        atomic_save_npz(path, evidence.arrays())
        _WRITTEN.setdefault(Path(folder).resolve(), set()).add(rel)
    return rel


def load(folder: Path, rel: str | None, digest: str | None, *, where: str) -> Evidence:
    """The evidence a snapshot references, verified against its recorded digest."""
    if not rel or not digest or not _NAME.match(rel):
        raise EvidenceError(f"{where} names no valid evidence sidecar ({rel!r}): re-record it")
    path = Path(folder) / rel
    if not path.is_file():
        raise EvidenceError(f"{where}: its evidence sidecar {path} is missing: re-record it")
    try:
        arrays = load_npz(path)
        evidence = Evidence.from_arrays(arrays)
    except (StoreError, EvidenceError, ValueError) as exc:
        raise EvidenceError(f"{where}: evidence sidecar {path} is unreadable ({exc})") from None
    # the digest of the arrays as stored: evidence recorded before a field existed (a VSI pool
    # derived on load) still verifies
    stored = digest_arrays(arrays)
    if stored != digest:
        raise EvidenceError(
            f"{where}: evidence sidecar {path} does not hold the recorded arrays (content digest "
            f"{stored[:12]} != {digest[:12]}); it was damaged or edited: re-record it"
        )
    return evidence


def remember(evidence: Evidence) -> None:
    """Keep the current run's evidence for a comparator that only sees its digest."""
    _CURRENT[evidence.digest] = evidence


def recall(digest: str | None) -> Evidence | None:
    return _CURRENT.get(digest or "")


def sweep(folder: Path, referenced: Iterable[str], owned: Iterable[str]) -> list[Path]:
    """Delete the sidecars of ``owned`` (relative paths benchc wrote) under ``folder`` that no
    snapshot references; returns what went. Any other file is left alone."""
    keep = set(referenced)
    gone = []
    for rel in sorted(set(owned) - keep):
        path = Path(folder) / rel
        if _NAME.match(rel) and path.is_file():
            path.unlink()
            gone.append(path)
    return gone


def referenced(folder: Path) -> set[str] | None:
    """The sidecars the benchc snapshots in ``folder`` name; None when one of its ``*.json``
    cannot be read (it might name any of them). JSON that is not a benchc snapshot (a list,
    another tool's file) names none."""
    refs: set[str] = set()
    for path in sorted(Path(folder).glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or "benchc_snapshot" not in data:
            continue
        ev = data.get("evidence")
        if isinstance(ev, dict) and isinstance(ev.get("file"), str):
            refs.add(ev["file"])
    return refs


def written(folder: Path) -> set[str]:
    """The sidecars of ``folder`` benchc wrote: those its baseline manifest lists and those
    this process wrote."""
    from benchc.gates.baselines import read_manifest

    listed = read_manifest(folder).get("files") or []
    owned = {f for f in listed if isinstance(f, str) and _NAME.match(f)}
    return owned | _WRITTEN.get(Path(folder).resolve(), set())


def sweep_unreferenced(folder: Path) -> list[Path]:
    """After a re-record of the baseline in ``folder`` (that folder only, never its
    siblings): delete the sidecars benchc wrote there that no snapshot references any more;
    nothing when a snapshot is unreadable."""
    refs = referenced(folder)
    if refs is None or not Path(folder).is_dir():
        return []
    return sweep(folder, refs, written(folder))
