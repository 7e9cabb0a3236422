"""The unit of work: one stored chunk (run key, entry, first row), computed by one function
(:meth:`SuiteRun.compute_chunk`) whoever calls it, and the store's view of what is missing."""

from __future__ import annotations

import numpy as np
import pytest

from benchc.results import ResultStore, RunKey, StoreError
from benchc.results.store import chunk_bounds, content_digest
from benchc_tests.unit.test_share import SlowDevice, _run


def test_chunk_bounds_are_the_stores_parts():
    assert chunk_bounds(10, 4) == [(0, 4), (4, 8), (8, 10)]
    assert chunk_bounds(8, 4) == [(0, 4), (4, 8)]
    with pytest.raises(ValueError, match="chunk_rows"):
        chunk_bounds(10, 0)


def test_missing_chunks_and_assemble(tmp_path):
    store = ResultStore(tmp_path, RunKey("m", "d", {"seed": 0}))
    assert store.missing_chunks("fog-1", 10, 4) == [(0, 4), (4, 8), (8, 10)]
    rows = {"x": np.arange(10, dtype=np.float32)}
    store.save_part("fog-1", 4, {"x": rows["x"][4:8]})
    assert store.missing_chunks("fog-1", 10, 4) == [(0, 4), (8, 10)]
    with pytest.raises(StoreError, match=r"fog-1: chunks rows 0-3, 8-9 are not stored"):
        store.assemble("fog-1", 10, 4)
    store.save_part("fog-1", 0, {"x": rows["x"][:4]})
    store.save_part("fog-1", 8, {"x": rows["x"][8:]})
    np.testing.assert_array_equal(store.assemble("fog-1", 10, 4)["x"], rows["x"])
    assert store.has("fog-1") and store.missing_chunks("fog-1", 10, 4) == []


def test_chunks_computed_one_by_one_are_the_stored_entry(tmp_path):
    """What an executor does (each chunk from ``compute_chunk``, saved as a part, assembled)
    stores the bytes the single-process path stores."""
    alone = _run(_data(tmp_path), tmp_path / "alone", SlowDevice(), (0, 1))
    expected = alone.condition("fog-1")
    other = _run(_data(tmp_path), tmp_path / "chunks", SlowDevice(), (0, 1))
    n = len(other.dataset)
    for start, stop in reversed(other.chunks("fog-1")):  # any order
        other.store.save_part("fog-1", start, other.compute_chunk("fog-1", start, stop))
    got = other.store.assemble("fog-1", n, other.chunk_rows)
    assert content_digest(alone.store.load("fog-1")) == content_digest(got)
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


def _data(tmp_path):
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    root = tmp_path / "data"
    if not root.exists():
        save_jsonl(generate(20, 5), root)
    return root
