"""The results store: atomic, pickle-free, resumable, and safe to share between processes."""

from __future__ import annotations

import multiprocessing as mp
import os

import numpy as np
import pytest

from benchc.results import ResultStore, RunKey, StoreError, load_npz


def _key(**settings) -> RunKey:
    return RunKey("model-fp", "data-fp", settings or {"image_size": 128, "seed": 0}, "tiny", "tb")


def _compute(calls: list[tuple[int, int]]):
    def compute(start: int, stop: int) -> dict[str, np.ndarray]:
        calls.append((start, stop))
        rows = np.arange(start, stop)
        return {"x": rows.astype(np.float32) * 0.5, "ids": rows.astype(np.int64)}

    return compute


def test_roundtrip_and_names(tmp_path):
    store = ResultStore(tmp_path, _key())
    store.save("clean", {"a": np.ones((3, 2), np.float32)})
    assert store.has("clean") and not store.has("fog-1")
    assert store.names() == ["clean"]
    np.testing.assert_array_equal(store.load("clean")["a"], np.ones((3, 2)))
    with pytest.raises(KeyError, match="no stored result 'fog-1'"):
        store.load("fog-1")


def test_settings_change_the_run_folder(tmp_path):
    a = ResultStore(tmp_path, _key(image_size=128))
    b = ResultStore(tmp_path, _key(image_size=448))
    assert a.run_dir != b.run_dir
    assert a.run_dir == ResultStore(tmp_path, _key(image_size=128)).run_dir


def test_refuses_object_arrays_and_bad_names(tmp_path):
    store = ResultStore(tmp_path, _key())
    with pytest.raises(TypeError, match="no pickles"):
        store.save("clean", {"a": np.array([{"x": 1}], dtype=object)})
    with pytest.raises(ValueError, match="result name"):
        store.save("../escape", {"a": np.zeros(1)})


def test_unreadable_file_is_a_clear_error(tmp_path):
    store = ResultStore(tmp_path, _key())
    store.path("clean").parent.mkdir(parents=True)
    store.path("clean").write_bytes(b"not a zip")
    with pytest.raises(StoreError, match="unreadable result file"):
        store.load("clean")


def test_no_temporary_files_left(tmp_path):
    store = ResultStore(tmp_path, _key())
    store.get_or_compute("fog-1", 10, 4, _compute([]))
    leftovers = [p for p in store.run_dir.rglob("*") if p.is_file() and p.suffix != ".npz"]
    assert leftovers == []
    assert not (store.run_dir / ".parts" / "fog-1").exists()


def test_get_or_compute_batches_and_caches(tmp_path):
    calls: list[tuple[int, int]] = []
    store = ResultStore(tmp_path, _key())
    out = store.get_or_compute("fog-1", 10, 4, _compute(calls))
    assert calls == [(0, 4), (4, 8), (8, 10)]
    np.testing.assert_array_equal(out["ids"], np.arange(10))
    again = store.get_or_compute("fog-1", 10, 4, _compute(calls))
    assert len(calls) == 3  # nothing recomputed
    np.testing.assert_array_equal(again["x"], out["x"])


def test_resume_after_crash_is_identical(tmp_path):
    reference = ResultStore(tmp_path / "ref", _key()).get_or_compute("fog-1", 10, 4, _compute([]))

    store = ResultStore(tmp_path / "run", _key())
    calls: list[tuple[int, int]] = []
    inner = _compute(calls)

    def crashing(start: int, stop: int):
        if start == 8:
            raise KeyboardInterrupt  # the run is killed during the last batch
        return inner(start, stop)

    with pytest.raises(KeyboardInterrupt):
        store.get_or_compute("fog-1", 10, 4, crashing)
    assert not store.has("fog-1")
    calls.clear()
    resumed = store.get_or_compute("fog-1", 10, 4, inner)
    assert calls == [(8, 10)]  # only the unfinished batch
    assert resumed.keys() == reference.keys()
    for k in reference:
        assert resumed[k].tobytes() == reference[k].tobytes()
    on_disk = load_npz(store.path("fog-1"))
    assert on_disk["x"].tobytes() == reference["x"].tobytes()


def test_row_count_mismatch(tmp_path):
    store = ResultStore(tmp_path, _key())
    store.get_or_compute("fog-1", 6, 4, _compute([]))
    with pytest.raises(StoreError, match="has 6 rows, the run expects 7"):
        store.get_or_compute("fog-1", 7, 4, _compute([]))
    with pytest.raises(StoreError, match="returned 1 rows, expected 4"):
        store.get_or_compute("fog-2", 8, 4, lambda a, b: {"x": np.zeros(1)})


def test_stale_lock_of_dead_process_is_taken_over(tmp_path):
    store = ResultStore(tmp_path, _key())
    lock = store.run_dir / ".locks" / "fog-1.lock"
    lock.parent.mkdir(parents=True)
    proc = mp.get_context("spawn").Process(target=os.getpid)
    proc.start()
    proc.join()
    import socket

    lock.write_text(f"{socket.gethostname()} {proc.pid}")
    out = store.get_or_compute("fog-1", 3, 4, _compute([]))
    assert out["ids"].tolist() == [0, 1, 2]
    assert not lock.exists()


def _worker(root: str, queue) -> None:
    calls: list[tuple[int, int]] = []
    store = ResultStore(root, _key())
    out = store.get_or_compute("fog-1", 12, 4, _compute(calls))
    queue.put((calls, out["x"].tobytes()))


def test_two_processes_compute_each_batch_once(tmp_path):
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(tmp_path), queue)) for _ in range(2)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    all_calls = sorted(c for calls, _ in results for c in calls)
    assert all_calls == [(0, 4), (4, 8), (8, 12)]
    assert results[0][1] == results[1][1]


def test_unreadable_finished_entry_is_recomputed(tmp_path):
    store = ResultStore(tmp_path, _key())
    store.get_or_compute("fog-1", 4, 4, _compute([]))
    store.path("fog-1").write_bytes(b"truncated by a power loss")
    calls: list[tuple[int, int]] = []
    out = store.get_or_compute("fog-1", 4, 4, _compute(calls))
    assert calls == [(0, 4)]
    assert out["ids"].tolist() == [0, 1, 2, 3]
    # said once, in the run's summary line, not as a warning
    assert [p.name for p, _ in store.repaired] == ["fog-1.npz"]
    note = store.repair_note()
    assert note is not None and note.startswith("repaired: 1 damaged stored file(s)")
    assert "fog-1.npz" in note
