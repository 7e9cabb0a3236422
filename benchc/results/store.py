"""The resumable results store: per (model, dataset, settings, condition) arrays on disk.

Why a store of its own: a 95-cell run on a real model takes hours, so every finished batch is
persisted at once and a killed run picks up where it stopped. Files are ``.npz`` read with
``allow_pickle=False`` (no code execution from a results folder) and written to a temporary file
renamed into place, so a reader never sees half a file; each file carries a checksum of its
arrays, so damaged content (a bit flip, a hand edit) is recomputed instead of trusted. Under
pytest-xdist several workers share one store; a per-condition lock file makes the second worker
wait for the first instead of computing the same arrays twice (see :mod:`benchc.results.lock`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchc.fsutil import atomic_write, slug
from benchc.results.lock import LOCK_TIMEOUT_S, FileLock, StoreError

#: Arrays of one stored entry (a condition, or one batch of it).
Arrays = dict[str, np.ndarray]

_NAME = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.\-]*$")
#: The array in every stored ``.npz`` holding the sha256 of the others (see :func:`content_digest`).
DIGEST_KEY = "__benchc_sha256__"

__all__ = [
    "LOCK_TIMEOUT_S",
    "Arrays",
    "ResultStore",
    "RunKey",
    "StoreError",
    "chunk_bounds",
    "slug",
]


def chunk_bounds(n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
    """An entry's chunks, ``(start, stop)``: starts at multiples of ``chunk_rows`` (the rows
    :meth:`ResultStore.get_or_compute` computes and saves as one part)."""
    if n_rows < 1 or chunk_rows < 1:
        raise ValueError(f"n_rows and chunk_rows must be >= 1, got {n_rows}, {chunk_rows}")
    return [(s, min(n_rows, s + chunk_rows)) for s in range(0, n_rows, chunk_rows)]


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


class StoreRepairWarning(UserWarning):
    """Kept for callers that filter it: a repair is no longer a warning but a line of the run's
    summary (:attr:`ResultStore.repaired`)."""


def damaged_in_read_only(
    err: StoreError, path: Path, origin: str, root: Path, location: str | None = None
) -> StoreError:
    """The one line for a damaged file of a store this process only reads: the file (under
    ``location``, the store as the user named it, when ``root`` is a local copy of it), that
    nothing was changed, and the two ways to mend it."""
    where = location or str(root)
    text = str(err).replace(str(root), where)
    shown = "the file" if location is None else f"{where}/{path.relative_to(root).as_posix()}"
    rerun = (
        f"--results-dir {root} instead of --from-store"
        if location is None
        else "--results-dir pointing at the store that was pushed there, instead of --from-store"
    )
    return StoreError(
        f"{text}; {origin} only reads this store, so {shown} was left as it is. Mend it where "
        f"the store was written: rerun the same pytest command with {rerun} (the damaged file "
        "is recomputed, nothing else), then benchc push that store again"
    )


def content_digest(arrays: Mapping[str, np.ndarray]) -> str:
    """sha256 over names, dtypes, shapes and bytes of ``arrays`` (in name order)."""
    h = hashlib.sha256(b"benchc-npz-1")
    for key in sorted(arrays):
        arr = np.ascontiguousarray(arrays[key])
        h.update(json.dumps([key, arr.dtype.str, list(arr.shape)]).encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def atomic_save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``arrays`` and their checksum to ``path`` as ``.npz``, atomically."""
    if DIGEST_KEY in arrays:
        raise ValueError(f"{DIGEST_KEY!r} is reserved for the checksum")
    payload = {**arrays, DIGEST_KEY: np.array(content_digest(arrays))}
    return atomic_write(path, lambda fh: np.savez(fh, **payload))


def load_npz(path: Path) -> Arrays:
    """Read an ``.npz`` fully into memory, refusing pickled objects and damaged content.

    Raises :class:`StoreError` naming the file when it is unreadable, has no checksum, or its
    arrays do not match the checksum recorded when it was written.
    """
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise StoreError(f"unreadable result file {path}: {exc}") from exc
    recorded = arrays.pop(DIGEST_KEY, None)
    if recorded is None:
        raise StoreError(f"damaged result file {path}: no checksum (not written by this benchc)")
    if str(recorded) != content_digest(arrays):
        raise StoreError(f"damaged result file {path}: content does not match its checksum")
    return arrays


def atomic_write_text(path: Path, text: str) -> None:
    """Text through the one atomic writer (kept for callers of the old name)."""
    atomic_write(path, text)


def manifest_checksum(meta: Mapping[str, Any]) -> str:
    """sha256 of a manifest's canonical JSON without its own ``checksum`` field."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode("utf-8")).hexdigest()


class ResultStore:
    """Arrays of one :class:`RunKey`, one ``<name>.npz`` per finished condition.

    Unfinished conditions keep their finished batches under ``.parts/<name>/<start>.npz``;
    :meth:`get_or_compute` resumes from them and merges them when the condition is complete.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        key: RunKey,
        *,
        lock_timeout: float | None = None,
        read_only: str | None = None,
        location: str | None = None,
    ) -> None:
        """``read_only``: who only reads this store (``"--from-store URL"``); such a store is
        never written, repaired or deleted from: a damaged file is a :class:`StoreError` naming
        it, a missing chunk one naming the chunk. ``location``: the store as the user named it
        when ``root`` is a local copy of it (a URL)."""
        self.root = Path(root)
        self.key = key
        self.lock_timeout = lock_timeout
        self.run_dir = self.root / key.dirname()
        self.read_only = read_only
        self.location = location
        #: Damaged files of this (writable) store removed to be recomputed, with why: the run's
        #: summary says so on one line (:meth:`repair_note`).
        self.repaired: list[tuple[Path, str]] = []

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
        self._writable(name)
        return atomic_save_npz(self.path(name), _check_arrays(arrays, name))

    def _writable(self, what: str) -> None:
        if self.read_only is not None:
            raise StoreError(f"{self.read_only}: {self.run_dir} is only read; {what} not written")

    def _damaged(self, path: Path, err: StoreError) -> None:
        """A damaged file: removed to be recomputed in a writable store, an error in one that
        is only read."""
        if self.read_only is not None:
            raise damaged_in_read_only(
                err, path, self.read_only, self.root, self.location
            ) from None
        path.unlink(missing_ok=True)
        self.repaired.append((path, str(err)))

    def repair_note(self) -> str | None:
        """One summary line for every damaged file this run removed and recomputed."""
        if not self.repaired:
            return None
        names = ", ".join(p.relative_to(self.run_dir).as_posix() for p, _ in self.repaired[:5])
        more = f" and {len(self.repaired) - 5} more" if len(self.repaired) > 5 else ""
        return (
            f"repaired: {len(self.repaired)} damaged stored file(s) of {self.run_dir} "
            f"recomputed ({names}{more})"
        )

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
        self._writable("manifest.json")
        meta = json.loads(json.dumps(meta, default=str))  # what reading it back gives
        meta["checksum"] = manifest_checksum(meta)
        path = self.run_dir / "manifest.json"
        atomic_write(path, json.dumps(meta, indent=2, sort_keys=True) + "\n")
        return path

    def manifest(self) -> dict[str, Any]:
        """The manifest, ``{}`` when absent; :class:`StoreError` when damaged."""
        return read_manifest(self.run_dir)

    def manifest_ok(self) -> bool:
        """True when the manifest exists, is intact and describes this run's key."""
        try:
            meta = self.manifest()
        except StoreError:
            return False
        return (
            bool(meta)
            and meta.get("dataset_fingerprint") == self.key.dataset_fingerprint
            and (meta.get("model_fingerprint") == self.key.model_fingerprint)
        )

    # -- batches of an unfinished entry -----------------------------------------------------
    def _parts_dir(self, name: str) -> Path:
        return self.run_dir / ".parts" / _check_name(name)

    def load_parts(self, name: str) -> dict[int, Arrays]:
        """Finished batches keyed by their first row; unreadable ones are dropped (recomputed),
        or, in a store that is only read, a :class:`StoreError` naming the file."""
        parts: dict[int, Arrays] = {}
        folder = self._parts_dir(name)
        if not folder.is_dir():
            return parts
        for path in sorted(folder.glob("*.npz")):
            try:
                parts[int(path.stem)] = load_npz(path)
            except StoreError as err:
                self._damaged(path, err)
            except ValueError:
                self._damaged(path, StoreError(f"unexpected file {path} (not a chunk)"))
        return parts

    def save_part(self, name: str, start: int, arrays: Mapping[str, np.ndarray]) -> Path:
        self._writable(f"{name}[{start}:]")
        path = self._parts_dir(name) / f"{start:09d}.npz"
        return atomic_save_npz(path, _check_arrays(arrays, f"{name}[{start}:]"))

    def missing_chunks(self, name: str, n_rows: int, chunk_rows: int) -> list[tuple[int, int]]:
        """Chunks of entry ``name`` neither finished nor saved as an intact part (what
        :meth:`get_or_compute` would compute now); ``[]`` once the entry is stored."""
        if self._load_finished(name) is not None:
            return []
        parts = self.load_parts(name)
        return [
            (start, stop)
            for start, stop in chunk_bounds(n_rows, chunk_rows)
            if start not in parts or _rows(parts[start]) != stop - start
        ]

    def assemble(self, name: str, n_rows: int, chunk_rows: int) -> Arrays:
        """Entry ``name`` from its saved parts, computing nothing: :class:`StoreError` naming
        the missing chunks when any is."""
        missing = self.missing_chunks(name, n_rows, chunk_rows)
        if missing:
            raise StoreError(f"{name}: chunks {describe_chunks(missing)} are not stored")
        return self.get_or_compute(name, n_rows, chunk_rows, _computes_nothing(name))

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
        if self.read_only is not None:
            return self._assembled_read_only(name, n_rows, batch_size)
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

    def _assembled_read_only(self, name: str, n_rows: int, chunk_rows: int) -> Arrays:
        """Entry ``name`` from its stored parts, in memory: no lock taken, nothing merged or
        removed on disk (the store is only read)."""
        parts = self.load_parts(name)
        rows: list[Arrays] = []
        for start, stop in chunk_bounds(n_rows, chunk_rows):
            part = parts.get(start)
            if part is None or _rows(part) != stop - start:
                raise StoreError(
                    f"{self.read_only}: {name}[{start}:{stop}] is not stored in {self.run_dir}"
                )
            rows.append(part)
        return _concat(rows, name)

    def _load_finished(self, name: str) -> Arrays | None:
        """The finished entry, or None; an unreadable one is removed so it gets recomputed
        (in a store that is only read: a :class:`StoreError` naming it, nothing removed)."""
        if not self.has(name):
            return None
        try:
            return self.load(name)
        except StoreError as err:
            self._damaged(self.path(name), err)
            return None

    def _checked(self, name: str, arrays: Arrays, n_rows: int) -> Arrays:
        if _rows(arrays) != n_rows:
            raise StoreError(
                f"stored result {self.path(name)} has {_rows(arrays)} rows, the run expects "
                f"{n_rows}; delete it or use another --results-dir"
            )
        return arrays

    def lock(self, name: str, timeout: float | None = None) -> FileLock:
        """Exclusive across processes and hosts (see :class:`benchc.results.lock.FileLock`)."""
        timeout = self.lock_timeout if timeout is None else timeout
        return FileLock(self.run_dir / ".locks" / f"{_check_name(name)}.lock", timeout=timeout)


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """``run_dir/manifest.json``; ``{}`` when absent, :class:`StoreError` when damaged."""
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"damaged manifest {path}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("checksum") != manifest_checksum(meta):
        raise StoreError(f"damaged manifest {path}: content does not match its checksum")
    return meta


def describe_chunks(chunks: list[tuple[int, int]]) -> str:
    """``rows 0-63, 128-191`` (one line, the first 8)."""
    text = ", ".join(f"{a}-{b - 1}" for a, b in chunks[:8])
    return f"rows {text}" + (f" and {len(chunks) - 8} more" if len(chunks) > 8 else "")


def _computes_nothing(name: str) -> Callable[[int, int], Mapping[str, np.ndarray]]:
    def refuse(start: int, stop: int) -> Mapping[str, np.ndarray]:
        raise StoreError(f"{name}[{start}:{stop}] is not stored")

    return refuse


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
