"""Resumable, pickle-free storage of per-condition model outputs."""

from benchc.results.store import ResultStore, RunKey, StoreError, atomic_save_npz, load_npz, slug

__all__ = ["ResultStore", "RunKey", "StoreError", "atomic_save_npz", "load_npz", "slug"]
