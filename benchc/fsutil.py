"""The one atomic file writer, the one slug rule and the one rule for showing a path.

Why atomic: a run killed mid-write (SIGKILL, OOM) must never leave a half file that a later
run or report trusts, so every write goes to a temporary file in the target's folder and is
renamed into place; on any failure the temporary file is removed. Why one slug: results
folders, threshold folders and model names must agree on which characters survive. Why one
display rule: a report is read on another machine or attached to CI, so a path under the
working directory is shown relative to it (no home or runner folder leaks in) and every place
that shows a path agrees.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: Longest slug; longer names keep a prefix and gain a hash of the full text (no collisions).
SLUG_MAX = 80


def atomic_write(
    path: str | os.PathLike[str],
    data: bytes | str | Callable[[BinaryIO], object],
    *,
    mode: int | None = None,
) -> Path:
    """Write ``data`` (bytes, text as UTF-8, or a callable writing to a binary file) to
    ``path`` through a temporary file in the same folder, then ``os.replace``.

    The temporary file never survives a failure. ``mode`` sets permissions (``mkstemp`` makes
    0600, too strict for a shared cache). Returns ``path``. No fsync: the rename is atomic
    against a killed process; a power loss is caught by the readers' checksums.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            if callable(data):
                data(fh)
            else:
                fh.write(data.encode("utf-8") if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def slug(text: str, *, max_len: int = SLUG_MAX) -> str:
    """A lowercase file-system-safe name: ``"Qwen/Qwen2.5-VL-7B"`` -> ``"qwen--qwen2.5-vl-7b"``.

    Path and hub separators become ``--``, other runs of unsafe characters ``-``; leading and
    trailing ``.``/``-`` are dropped (no hidden or relative names). Raises ``ValueError`` when
    nothing is left.
    """
    s = str(text).strip().replace("\\", "/").strip("/").replace("/", "--").lower()
    s = re.sub(r"[^a-z0-9._-]+", "-", s).strip(".-")
    if not s:
        raise ValueError(f"{text!r} gives an empty name (no letters or digits)")
    if len(s) > max_len:
        digest = hashlib.sha256(str(text).encode("utf-8")).hexdigest()[:8]
        s = f"{s[: max_len - 9].rstrip('.-')}-{digest}"
    return s


def display_path(path: str | os.PathLike[str], *, cwd: str | os.PathLike[str] | None = None) -> str:
    """``path`` as a report shows it: relative to ``cwd`` (default: the working directory) when
    it lies inside it (``"."`` for ``cwd`` itself), else absolute.

    Compared as written first, then with symlinks resolved (a ``/tmp`` that is a link to
    ``/private/tmp`` still counts as inside).
    """
    base = Path(os.path.abspath(Path.cwd() if cwd is None else cwd))
    p = Path(os.path.abspath(base / Path(path)))
    for here, root in ((p, base), (p.resolve(), base.resolve())):
        if here.is_relative_to(root):
            return here.relative_to(root).as_posix() or "."
    return str(p)
