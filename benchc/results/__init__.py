"""Resumable, pickle-free storage of per-condition model outputs."""

from benchc.results.lock import FileLock, StoreError
from benchc.results.store import ResultStore, RunKey, atomic_save_npz, load_npz, slug

__all__ = ["FileLock", "ResultStore", "RunKey", "StoreError", "atomic_save_npz", "load_npz", "slug"]
