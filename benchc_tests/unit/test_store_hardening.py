"""Locks, checksums, the one atomic writer and the one slug (issue 11, items 4, 6 and the
writer/slug consolidation)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import benchc.results.lock as lock_mod
from benchc.fsutil import atomic_write, slug
from benchc.results import FileLock, ResultStore, RunKey, StoreError, load_npz
from benchc.results.lock import boot_id, process_start


def _store(tmp_path) -> ResultStore:
    return ResultStore(tmp_path, RunKey("model-fp", "data-fp", {"seed": 0}, "tiny", "tb"))


def _compute(start: int, stop: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(start, stop, dtype=np.float32)}


def _write_lock(path, **fields) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"host": socket.gethostname(), "boot": boot_id(), **fields}))


# -- locks --------------------------------------------------------------------------------------
def test_lock_of_a_reused_pid_is_taken_over_at_once(tmp_path):
    """The PID is alive but belongs to another process (its start time differs)."""
    store = _store(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = process_start(other.pid)
        assert start is not None
        lock = store.run_dir / ".locks" / "fog-1.lock"
        _write_lock(lock, pid=other.pid, start=start - 1)  # the holder started earlier
        t0 = time.monotonic()
        out = store.get_or_compute("fog-1", 3, 4, _compute)
        assert time.monotonic() - t0 < 5
        assert out["x"].tolist() == [0, 1, 2] and not lock.exists()
    finally:
        other.kill()
        other.wait()


def test_lock_of_a_live_process_on_this_host_is_waited_for(tmp_path):
    store = _store(tmp_path)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lock = store.run_dir / ".locks" / "fog-1.lock"
        _write_lock(lock, pid=other.pid, start=process_start(other.pid))
        os.utime(lock, (1, 1))  # its heartbeat stopped long ago (a stopped process)
        with pytest.raises(StoreError, match="timed out"):
            FileLock(lock, timeout=0.3).acquire()  # bounded wait, never taken over
        os.utime(lock)  # a fresh heartbeat: busy, the wait is not bounded by the timeout
        verdict, holder, _ = FileLock(lock, timeout=0.3)._inspect()
        assert verdict == "busy" and holder["pid"] == other.pid
    finally:
        other.kill()
        other.wait()


def test_lock_from_another_host_waits_visibly_then_times_out(tmp_path, capfd):
    lock = tmp_path / "x.lock"
    lock.write_text(json.dumps({"host": "build-node-7", "pid": 4242, "start": 1}))
    t0 = time.monotonic()
    with pytest.raises(StoreError) as info:
        with FileLock(lock, timeout=0.5):
            pass
    assert 0.4 < time.monotonic() - t0 < 5
    message = str(info.value)
    assert "held by host build-node-7 pid 4242" in message and "--lock-timeout" in message
    assert "benchc: waiting up to 0.5 s for lock" in capfd.readouterr().err
    assert lock.exists()  # never taken over: another host cannot be checked


def test_lock_timeout_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("BENCHC_LOCK_TIMEOUT", "0.2")
    assert FileLock(tmp_path / "a.lock").timeout == 0.2
    monkeypatch.setenv("BENCHC_LOCK_TIMEOUT", "soon")
    with pytest.raises(StoreError, match="not a number"):
        FileLock(tmp_path / "a.lock")


def test_holder_records_itself_and_beats(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_mod, "HEARTBEAT_S", 0.05)
    path = tmp_path / "b.lock"
    with FileLock(path):
        rec = json.loads(path.read_text())
        assert rec["pid"] == os.getpid() and rec["host"] == socket.gethostname()
        assert rec["start"] == process_start(os.getpid()) and rec["boot"] == boot_id()
        os.utime(path, (1, 1))
        time.sleep(0.3)
        assert time.time() - path.stat().st_mtime < 5  # the heartbeat touched it
    assert not path.exists()
    assert not [p for p in tmp_path.iterdir()]  # no temp or aside files left


def test_two_threads_of_one_process_exclude_each_other(tmp_path):
    import threading

    path, order = tmp_path / "c.lock", []

    def hold(tag: str) -> None:
        with FileLock(path, timeout=10):
            order.append(f"{tag}+")
            time.sleep(0.2)
            order.append(f"{tag}-")

    threads = [threading.Thread(target=hold, args=(t,)) for t in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order in (["a+", "a-", "b+", "b-"], ["b+", "b-", "a+", "a-"])


# -- checksums ----------------------------------------------------------------------------------
def test_changed_content_with_a_valid_format_is_recomputed(tmp_path):
    store = _store(tmp_path)
    store.get_or_compute("fog-1", 4, 4, _compute)
    good = load_npz(store.path("fog-1"))
    tampered = dict(good, x=good["x"] + 1)
    # a valid npz holding other numbers under the old checksum
    with np.load(store.path("fog-1")) as npz:
        digest = npz["__benchc_sha256__"]
    np.savez(store.path("fog-1"), **tampered, __benchc_sha256__=digest)
    with pytest.raises(StoreError, match="does not match its checksum"):
        load_npz(store.path("fog-1"))
    calls = []
    out = store.get_or_compute("fog-1", 4, 4, lambda a, b: calls.append(a) or _compute(a, b))
    assert [p.name for p, _ in store.repaired] == ["fog-1.npz"]
    assert calls == [0] and out["x"].tolist() == [0, 1, 2, 3]


def test_manifest_checksum(tmp_path):
    store = _store(tmp_path)
    store.write_manifest({"model_spec": "x"})
    assert store.manifest_ok() and store.manifest()["model_spec"] == "x"
    meta = json.loads((store.run_dir / "manifest.json").read_text())
    meta["dataset_fingerprint"] = "other"
    (store.run_dir / "manifest.json").write_text(json.dumps(meta))
    assert not store.manifest_ok()
    with pytest.raises(StoreError, match="damaged manifest"):
        store.manifest()


# -- the one atomic writer and the one slug ------------------------------------------------------
def test_atomic_write_leaves_nothing_behind_on_failure(tmp_path):
    target = tmp_path / "out" / "file.txt"
    atomic_write(target, "first")

    def boom(fh) -> None:
        fh.write(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        atomic_write(target, boom)
    assert target.read_text() == "first"  # the old content is intact
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"]  # no temp file
    atomic_write(target, b"bytes", mode=0o644)
    assert target.read_bytes() == b"bytes" and (target.stat().st_mode & 0o777) == 0o644


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("tiny-vlm", "tiny-vlm"),
        ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen--qwen2.5-vl-7b-instruct"),
        ("/abs/path/My Model/", "abs--path--my-model"),
        ("C:\\models\\x", "c---models--x"),
        ("..hidden..", "hidden"),
        ("module:callable", "module-callable"),
    ],
)
def test_slug(text, want):
    assert slug(text) == want


def test_slug_long_names_stay_unique_and_bounded():
    a, b = slug("org/" + "x" * 200 + "a"), slug("org/" + "x" * 200 + "b")
    assert len(a) <= 80 and len(b) <= 80 and a != b
    with pytest.raises(ValueError, match="empty name"):
        slug("///")


def test_the_three_former_slugs_are_one():
    from benchc.gates.snapshot import model_slug
    from benchc.models.source import slug as source_slug
    from benchc.results import slug as store_slug

    assert model_slug is slug and source_slug is slug and store_slug is slug
