"""The pickle-free array sidecars of threshold snapshots: ``<folder>/arrays/<digest>.npz``.

Content-addressed: the file name is the digest of the arrays it holds (verified on every load,
so a damaged or hand-edited file is one clear error instead of silently wrong baselines), equal
evidence is stored once, and files no snapshot references any more are swept after a re-record.
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


def relpath(evidence: Evidence) -> str:
    """The sidecar path of ``evidence``, relative to its snapshot folder."""
    return f"{ARRAYS}/{evidence.digest[:20]}.npz"


def save(folder: Path, evidence: Evidence) -> str:
    """Write ``evidence`` (once; equal content is already there) and return its relative path."""
    rel = relpath(evidence)
    path = Path(folder) / rel
    if not path.is_file():
        atomic_save_npz(path, evidence.arrays())
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


def sweep(folder: Path, referenced: Iterable[str]) -> list[Path]:
    """Delete sidecars under ``folder`` that no snapshot references; returns what went."""
    keep = {Path(folder) / r for r in referenced}
    gone = []
    for path in sorted((Path(folder) / ARRAYS).glob("*.npz")):
        if path not in keep:
            path.unlink()
            gone.append(path)
    return gone


def sweep_unreferenced(thresholds_dir: Path) -> None:
    """After a re-record, delete the evidence files no snapshot of their model folder
    references; an unreadable snapshot stops the sweep (it might reference any of them)."""
    for folder in sorted(p for p in Path(thresholds_dir).glob("*") if (p / ARRAYS).is_dir()):
        refs = set()
        for path in folder.glob("*.json"):
            try:
                ev = json.loads(path.read_text(encoding="utf-8")).get("evidence") or {}
            except (OSError, ValueError):
                return  # an unreadable snapshot: delete nothing it might reference
            if ev.get("file"):
                refs.add(ev["file"])
        sweep(folder, refs)
