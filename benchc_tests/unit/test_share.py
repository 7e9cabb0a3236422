"""xdist workers computing one condition together (``benchc.suite.share``): nobody waits for
``clean`` while another scores it, no chunk is scored twice, the arrays are a single process's."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchc.data import load_dataset, save_jsonl
from benchc.data.synthetic import generate
from benchc.models.base import Backend, BatchOutput, Query
from benchc.suite.config import DEFAULT_MODEL, SuiteConfig
from benchc.suite.run import SuiteRun


class SlowDevice(Backend):
    """Option logits from the image's pixels; each batch takes 20 ms (a GPU, GIL released)."""

    fingerprint, name, batch_size = "fake:share", "fake-share", 2

    def __init__(self) -> None:
        self.rows: list[str] = []
        self._lock = threading.Lock()

    def forward(self, queries: Sequence[Query], **kwargs) -> BatchOutput:
        time.sleep(0.02)
        with self._lock:
            self.rows += [q.id for q in queries]
        k = max(len(q.options) for q in queries)
        logits = np.full((len(queries), k), np.nan, np.float32)
        for i, q in enumerate(queries):
            means = q.image.reshape(-1, 3).mean(0)
            logits[i, : len(q.options)] = [means[j % 3] / (j + 1) for j in range(len(q.options))]
        return BatchOutput(logits, np.ones(len(queries), np.float32))


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("share")
    save_jsonl(generate(40, 5), root / "data")
    return root / "data"


def _run(data_dir: Path, results: Path, backend: Backend, share: tuple[int, int]) -> SuiteRun:
    cfg = SuiteConfig(
        model=DEFAULT_MODEL,
        dataset=str(data_dir),
        image_size=64,
        results_dir=results,
        cache_dir=results.parent / "cache",
    )
    run = SuiteRun(cfg, load_dataset(cfg.dataset), backend)
    run.share_as = share
    return run


def test_two_workers_split_clean_and_store_a_single_processs_arrays(data_dir, tmp_path):
    alone = _run(data_dir, tmp_path / "alone", SlowDevice(), (0, 1))
    expected = alone.condition("clean")
    assert alone.chunk_rows == 8  # five chunks

    backends = [SlowDevice(), SlowDevice()]
    runs = [_run(data_dir, tmp_path / "shared", b, (i, 2)) for i, b in enumerate(backends)]
    got: list[dict] = [{}, {}]

    def work(i: int) -> None:
        got[i] = runs[i].condition("clean")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = [len(b.rows) for b in backends]
    assert sum(counts) == 40 and min(counts) >= 8  # both scored, nothing twice
    assert sorted(backends[0].rows + backends[1].rows) == sorted(alone.dataset.ids)
    for arrays in got:
        for name in ("option_logits", "option_mass"):
            np.testing.assert_array_equal(arrays[name], expected[name])


def test_a_lone_worker_does_not_wait_for_workers_that_never_come(data_dir, tmp_path):
    backend = SlowDevice()
    run = _run(data_dir, tmp_path / "lone", backend, (1, 4))
    began = time.monotonic()
    run.condition("clean")
    assert len(backend.rows) == 40
    assert time.monotonic() - began < 30  # no wait on the three absent workers


def test_a_dead_workers_claim_is_computed_by_the_others(data_dir, tmp_path):
    backend = SlowDevice()
    run = _run(data_dir, tmp_path / "dead", backend, (0, 2))
    claims = run.store._parts_dir("clean") / "claims"
    claims.mkdir(parents=True)
    # a claim by a process that is gone (pid 2**22 + 1 is beyond any pid_max default)
    (claims / f"{8:09d}").write_text(json.dumps({"host": _host(), "pid": 2**22 + 1}))
    run.condition("clean")
    assert sorted(backend.rows) == sorted(run.dataset.ids)
    assert run.store.has("clean")


def _host() -> str:
    import socket

    return socket.gethostname()


def test_a_claim_appears_with_its_holder_and_leaves_nothing_else(tmp_path, monkeypatch):
    """A claim is never seen empty (read as "holder gone", it let two workers score one
    chunk): the record is linked into place whole; where hard links fail, exclusive create."""
    from benchc.suite import share

    path = tmp_path / f"{8:09d}"
    assert share._claim(path) and not share._claim(path)
    assert json.loads(path.read_text())["pid"] == os.getpid() and share._alive(path)
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no staging file left

    def no_links(*args):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(share.os, "link", no_links)
    other = tmp_path / f"{16:09d}"
    assert share._claim(other) and not share._claim(other)
    assert json.loads(other.read_text())["host"] == _host()
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name, other.name]
    assert not share._claim(tmp_path / "gone" / f"{0:09d}")  # entry finished meanwhile


def test_only_the_suites_own_xdist_runs_share(data_dir, tmp_path, monkeypatch):
    """A SuiteRun built in an xdist worker process by a library call or a test shares nothing
    (it would start at another worker's chunk and wait for claims nobody makes); the run the
    plugin configures as worker ``gwN`` shares with its N siblings."""
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "2")
    cfg = SuiteConfig(
        model=DEFAULT_MODEL, dataset=str(data_dir), image_size=64, results_dir=tmp_path / "r"
    )
    dataset = load_dataset(cfg.dataset)
    assert SuiteRun(cfg, dataset, SlowDevice()).share_as == (0, 0)
    suite = SuiteRun(replace(cfg, worker_id="gw1"), dataset, SlowDevice())
    assert suite.share_as == (1, 2)
