"""Several xdist workers computing one stored entry together, chunk by chunk.

Every cell needs ``clean``: under ``-n 8`` on 8 GPUs, seven workers used to wait on its lock
while one scored it (and the same for VSI). Here each worker that needs an entry claims its
unfinished chunks one at a time (an exclusively created claim file), starting at its own offset
so the workers spread over the entry, computes and saves each as a part; then it waits only
for chunks other live workers are computing, and :meth:`ResultStore.get_or_compute` assembles
the parts (computing any a dead worker left). Chunks are the rows a single process would
compute, so the stored arrays are identical.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from benchc.results import ResultStore

Compute = Callable[[int, int], Mapping[str, np.ndarray]]
#: Seconds to wait for chunks other live workers hold (``--lock-timeout`` overrides).
SHARE_WAIT_S = 600.0


def compute_shared(
    store: ResultStore,
    name: str,
    n_rows: int,
    chunk_rows: int,
    compute: Compute,
    *,
    worker: int,
    workers: int,
    wait_s: float = SHARE_WAIT_S,
    poll_s: float = 0.2,
) -> int:
    """Compute this worker's claimable chunks of entry ``name`` into parts, then wait (at most
    ``wait_s``) for the chunks live workers hold. Returns how many chunks this worker computed.
    The caller then calls ``store.get_or_compute``, which assembles the parts."""
    if store.has(name):
        return 0
    folder = store._parts_dir(name)
    claims = folder / "claims"
    claims.mkdir(parents=True, exist_ok=True)
    starts = list(range(0, n_rows, chunk_rows))
    offset = (worker * len(starts)) // max(1, workers)
    computed = 0
    for start in starts[offset:] + starts[:offset]:
        if store.has(name):
            return computed
        if _part(folder, start).exists() or not _claim(claims / f"{start:09d}"):
            continue
        stop = min(n_rows, start + chunk_rows)
        try:
            store.save_part(name, start, compute(start, stop))
        except BaseException:
            (claims / f"{start:09d}").unlink(missing_ok=True)  # nobody waits for it
            raise
        computed += 1
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and not store.has(name):
        held = [s for s in starts if not _part(folder, s).exists() and _alive(claims / f"{s:09d}")]
        if not held:
            break
        time.sleep(poll_s)
    return computed


def _part(folder: Path, start: int) -> Path:
    return folder / f"{start:09d}.npz"


def _claim(path: Path) -> bool:
    """Create ``path`` exclusively, recording who holds it. The record is written first and
    hard-linked into place, so no other worker ever reads a claim without its holder (an empty
    file read as "holder gone" let two workers score one chunk)."""
    record = json.dumps({"host": socket.gethostname(), "pid": os.getpid()})
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{time.monotonic_ns()}")
    try:
        tmp.write_text(record)
    except FileNotFoundError:  # the entry was finished and its parts removed meanwhile
        return False
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    except FileNotFoundError:
        return False
    except OSError:  # a filesystem without hard links: exclusive create, then the record
        return _claim_exclusive(path, record)
    finally:
        tmp.unlink(missing_ok=True)


def _claim_exclusive(path: Path, record: str) -> bool:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except (FileExistsError, FileNotFoundError):
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(record)
    return True


def _alive(path: Path) -> bool:
    """Whether the claim at ``path`` is held by a live process (on another host: assumed)."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if rec.get("host") != socket.gethostname():
        return True
    try:
        os.kill(int(rec["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, ValueError, TypeError):
        return True
    return True
