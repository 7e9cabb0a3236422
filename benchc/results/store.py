"""The resumable results store: per (model, dataset, settings, condition) arrays on disk.

Why a store of its own: a 95-cell run on a real model takes hours, so every finished batch is
persisted at once and a killed run picks up where it stopped. Files are ``.npz`` read with
``allow_pickle=False`` (no code execution from a results folder) and written to a temporary file
renamed into place, so a reader never sees half a file. Under pytest-xdist several workers share
one store; a per-condition lock file makes the second worker wait for the first instead of
computing the same arrays twice.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: Arrays of one stored entry (a condition, or one batch of it).
Arrays = dict[str, np.ndarray]

_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*$")
#: How long a worker waits for another process's lock before giving up.
LOCK_TIMEOUT_S = 6 * 3600.0


class StoreError(RuntimeError):
    """A stored entry is unreadable or inconsistent with what the run expects."""


def slug(text: str) -> str:
    """``text`` reduced to characters valid in result and run names."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[:48] or "x"


@dataclass(frozen=True)
class RunKey:
    """What identifies a set of results: model, dataset and every setting that changes outputs.

    ``settings`` holds e.g. the image size and seed; it is hashed, so adding a setting
    invalidates old results instead of silently mixing them.
    """

    model_fingerprint: str
    dataset_fingerprint: str
    settings: Mapping[str, Any] = field(default_factory=dict)
    model_name: str = "model"
    dataset_name: str = "dataset"

    def digest(self) -> str:
        blob = json.dumps(
            {
                "model": self.model_fingerprint,
                "dataset": self.dataset_fingerprint,
                "settings": dict(self.settings),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode()).hexdigest()

    def dirname(self) -> str:
        """Readable and unique: ``<model>/<dataset>-<digest12>``."""
        return f"{slug(self.model_name)}/{slug(self.dataset_name)}-{self.digest()[:12]}"


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"result name {name!r} must match {_NAME.pattern}")
    return name


def _check_arrays(arrays: Mapping[str, np.ndarray], what: str) -> Arrays:
    out: Arrays = {}
    for key, value in arrays.items():
        arr = np.asarray(value)
        if arr.dtype == object:
            raise TypeError(f"{what}: array {key!r} has dtype object; the store holds no pickles")
        out[key] = arr
    return out


def atomic_save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` to ``path`` as ``.npz`` via a temporary file in the same folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
        # No fsync: the rename alone is atomic against a killed process, which is what resuming
        # needs; an entry left unreadable by a power loss is recomputed (see get_or_compute).
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def load_npz(path: Path) -> Arrays:
    """Read an ``.npz`` fully into memory, refusing pickled objects."""
    try:
        with np.load(path, allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise StoreError(f"unreadable result file {path}: {exc}") from exc


def atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ResultStore:
    """Arrays of one :class:`RunKey`, one ``<name>.npz`` per finished condition.

    Unfinished conditions keep their finished batches under ``.parts/<name>/<start>.npz``;
    :meth:`get_or_compute` resumes from them and merges them when the condition is complete.
    """

    def __init__(self, root: str | os.PathLike[str], key: RunKey) -> None:
        self.root = Path(root)
        self.key = key
        self.run_dir = self.root / key.dirname()
        self._held: set[str] = set()

    def __repr__(self) -> str:
        return f"ResultStore({str(self.run_dir)!r})"

    # -- finished entries -------------------------------------------------------------------
    def path(self, name: str) -> Path:
        return self.run_dir / f"{_check_name(name)}.npz"

    def has(self, name: str) -> bool:
        return self.path(name).is_file()

    def load(self, name: str) -> Arrays:
        path = self.path(name)
        if not path.is_file():
            raise KeyError(f"no stored result {name!r} in {self.run_dir}")
        return load_npz(path)

    def save(self, name: str, arrays: Mapping[str, np.ndarray]) -> Path:
        return atomic_save_npz(self.path(name), _check_arrays(arrays, name))

    def names(self) -> list[str]:
        """Finished entries, sorted."""
        if not self.run_dir.is_dir():
            return []
        return sorted(p.stem for p in self.run_dir.glob("*.npz"))

    # -- manifest ---------------------------------------------------------------------------
    def write_manifest(self, extra: Mapping[str, Any] | None = None) -> Path:
        """Record what this run folder holds, so reports and humans can tell runs apart."""
        meta = {
            "model_name": self.key.model_name,
            "model_fingerprint": self.key.model_fingerprint,
            "dataset_name": self.key.dataset_name,
            "dataset_fingerprint": self.key.dataset_fingerprint,
            "settings": dict(self.key.settings),
            **(dict(extra) if extra else {}),
        }
        path = self.run_dir / "manifest.json"
        atomic_write_text(path, json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n")
        return path

    def manifest(self) -> dict[str, Any]:
        path = self.run_dir / "manifest.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    # -- batches of an unfinished entry -----------------------------------------------------
    def _parts_dir(self, name: str) -> Path:
        return self.run_dir / ".parts" / _check_name(name)

    def load_parts(self, name: str) -> dict[int, Arrays]:
        """Finished batches keyed by their first row; unreadable ones are dropped (recomputed)."""
        parts: dict[int, Arrays] = {}
        folder = self._parts_dir(name)
        if not folder.is_dir():
            return parts
        for path in sorted(folder.glob("*.npz")):
            try:
                parts[int(path.stem)] = load_npz(path)
            except (StoreError, ValueError):
                path.unlink(missing_ok=True)
        return parts

    def save_part(self, name: str, start: int, arrays: Mapping[str, np.ndarray]) -> Path:
        path = self._parts_dir(name) / f"{start:09d}.npz"
        return atomic_save_npz(path, _check_arrays(arrays, f"{name}[{start}:]"))

    # -- the resumable computation ----------------------------------------------------------
    def get_or_compute(
        self,
        name: str,
        n_rows: int,
        batch_size: int,
        compute: Callable[[int, int], Mapping[str, np.ndarray]],
    ) -> Arrays:
        """Return entry ``name`` with ``n_rows`` rows, computing missing batches with
        ``compute(start, stop)`` and saving each before the next starts.

        Every array's first axis is the row axis. Batches always start at multiples of
        ``batch_size``; a resumed run with another batch size recomputes only the rows it
        cannot reuse.
        """
        if n_rows < 1 or batch_size < 1:
            raise ValueError(f"n_rows and batch_size must be >= 1, got {n_rows}, {batch_size}")
        done = self._load_finished(name)
        if done is not None:
            return self._checked(name, done, n_rows)
        with self.lock(name):
            done = self._load_finished(name)  # another process may have finished it meanwhile
            if done is not None:
                return self._checked(name, done, n_rows)
            parts = self.load_parts(name)
            rows: list[Arrays] = []
            start = 0
            while start < n_rows:
                part = parts.get(start)
                if part is not None and _rows(part) > 0 and start + _rows(part) <= n_rows:
                    rows.append(part)
                    start += _rows(part)
                    continue
                stop = min(n_rows, start + batch_size)
                arrays = _check_arrays(compute(start, stop), f"{name}[{start}:{stop}]")
                if _rows(arrays) != stop - start:
                    raise StoreError(
                        f"{name}[{start}:{stop}]: compute returned {_rows(arrays)} rows, "
                        f"expected {stop - start}"
                    )
                self.save_part(name, start, arrays)
                rows.append(arrays)
                start = stop
            merged = _concat(rows, name)
            self.save(name, merged)
            shutil.rmtree(self._parts_dir(name), ignore_errors=True)
            return merged

    def _load_finished(self, name: str) -> Arrays | None:
        """The finished entry, or None; an unreadable one is removed so it gets recomputed."""
        if not self.has(name):
            return None
        try:
            return self.load(name)
        except StoreError:
            self.path(name).unlink(missing_ok=True)
            return None

    def _checked(self, name: str, arrays: Arrays, n_rows: int) -> Arrays:
        if _rows(arrays) != n_rows:
            raise StoreError(
                f"stored result {self.path(name)} has {_rows(arrays)} rows, the run expects "
                f"{n_rows}; delete it or use another --results-dir"
            )
        return arrays

    @contextlib.contextmanager
    def lock(self, name: str, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Exclusive across processes; a lock left by a dead process is taken over."""
        path = self.run_dir / ".locks" / f"{_check_name(name)}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        me = f"{socket.gethostname()} {os.getpid()}"
        deadline = time.monotonic() + timeout
        while True:
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                if self._stale(path, name):
                    path.unlink(missing_ok=True)
                    continue
                if time.monotonic() > deadline:
                    raise StoreError(f"timed out waiting for lock {path}") from None
                time.sleep(0.1)
                continue
            with os.fdopen(fd, "w") as fh:
                fh.write(me)
            break
        self._held.add(name)
        try:
            yield
        finally:
            self._held.discard(name)
            path.unlink(missing_ok=True)

    def _stale(self, path: Path, name: str) -> bool:
        try:
            host, pid = path.read_text().split()
        except (OSError, ValueError):
            # Being written right now, or garbage: garbage older than a few seconds is stale.
            with contextlib.suppress(OSError):
                return time.time() - path.stat().st_mtime > 5.0
            return False
        if host != socket.gethostname():
            return False
        if int(pid) == os.getpid():
            return name not in self._held
        return not _pid_alive(int(pid))


def _rows(arrays: Mapping[str, np.ndarray]) -> int:
    lengths = {k: (v.shape[0] if v.ndim else -1) for k, v in arrays.items()}
    if not lengths:
        return 0
    if len(set(lengths.values())) != 1 or -1 in lengths.values():
        raise StoreError(f"arrays disagree on their row count: {lengths}")
    return next(iter(lengths.values()))


def _concat(parts: list[Arrays], name: str) -> Arrays:
    keys = set(parts[0])
    for part in parts[1:]:
        if set(part) != keys:
            raise StoreError(
                f"{name}: batches hold different arrays {sorted(keys)} vs {sorted(part)}"
            )
    return {k: np.concatenate([p[k] for p in parts], axis=0) for k in sorted(keys)}
