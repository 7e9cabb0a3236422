"""What a folder holds, byte for byte: the check that a read path changed nothing.

``tree(root)`` maps every file under ``root`` to its sha256 and every folder to ``"dir"``, so
a file written, rewritten, deleted or quarantined, and a folder created (a lock folder, a
``.parts`` merge) all show as a difference.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def tree(root: Path) -> dict[str, str]:
    """``{relative path: sha256 of its bytes, or "dir"}`` of everything under ``root``."""
    root = Path(root)
    out: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        out[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def assert_untouched(before: dict[str, str], root: Path) -> None:
    """``root`` holds exactly what ``before`` recorded; the message names each difference."""
    after = tree(root)
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    gone = sorted(before.keys() - after.keys())
    new = sorted(after.keys() - before.keys())
    assert not (changed or gone or new), f"changed {changed}, removed {gone}, added {new}"
