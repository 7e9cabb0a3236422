"""The grid on a local Ray cluster (``-m cluster``, needs ``benchc[ray]``): the embedded model's
run over two actors stores a single process's bytes, survives killed actors and a killed
driver, and a CPU-only job gates on the finished store without the model.

One Ray instance serves the module (3 CPUs: two actors and one left free for restarts); the
drivers under test are ``pytest --executor=ray --ray-address=...`` subprocesses, except where an
actor must be killed at a precise moment (then the driver runs in this process).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchc.results.store import content_digest, load_npz
from benchc.suite.config import DEFAULT_MODEL

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
#: A tiny grid: 2 corruptions x 1 severity on 40 samples in chunks of 16 rows (3 per entry),
#: VSI included, and the option rotations of clean and both cells: 21 chunks.
GRID = ["--corruptions=fog,gaussian_noise", "--severities=1", "--limit=40", "--batch-size=4"]
CHUNKS = 21


@pytest.fixture(scope="module")
def cluster_address() -> Iterator[str]:
    import ray  # benchc[ray]: a -m cluster run without it fails here, loudly

    info = ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False)
    try:
        yield info.address_info["gcs_address"]
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("cluster")
    shutil.copytree(DEFAULT_MODEL, root / "tiny-vlm")  # test 5 takes its weights away
    return root


def suite(work: Path, results: Path, *extra: str, timeout: float = 600) -> subprocess.Popen:
    """``pytest benchc_tests/suite`` on the tiny grid, started (not waited for)."""
    cmd = [sys.executable, "-m", "pytest", "benchc_tests/suite", "-p", "no:cacheprovider",
           "-v", f"--model={work / 'tiny-vlm'}", f"--results-dir={results}",
           f"--cache-dir={work / 'cache'}", *GRID, *extra]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finished(proc: subprocess.Popen, timeout: float = 600) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-4000:]
    return out


def outcomes(out: str) -> dict[str, str]:
    """Each case's outcome in a ``-v`` run."""
    return dict(re.findall(r"^(benchc_tests/suite/\S+) (PASSED|FAILED|SKIPPED|ERROR)", out, re.M))


def digests(results: Path) -> dict[str, str]:
    """Every stored entry's content checksum, by <dataset>/<entry> (run folders differ: a
    distributed run's key holds its device class)."""
    out = {}
    for path in sorted(results.glob("*/*/*.npz")):
        dataset = path.parent.name.rsplit("-", 1)[0]
        out[f"{dataset}/{path.stem}"] = content_digest(load_npz(path))
    return out


def ray_note(out: str) -> dict[str, int]:
    m = re.search(
        r"ray: (\d+) chunks \((\d+) queries\) over (\d+) actors? .*?; (\d+) redone, (\d+) "
        r"duplicates, (\d+) already stored",
        out,
    )
    assert m, out[-3000:]
    keys = ("chunks", "queries", "actors", "redone", "duplicates", "already")
    return dict(zip(keys, map(int, m.groups()), strict=True))


@pytest.fixture(scope="module")
def single(work: Path) -> tuple[Path, str]:
    """The single-process run every distributed one must equal."""
    results = work / "single"
    return results, finished(suite(work, results))


@pytest.fixture(scope="module")
def distributed(work: Path, single, cluster_address: str) -> tuple[Path, str]:
    results = work / "ray"
    out = finished(suite(work, results, "--executor=ray", f"--ray-address={cluster_address}",
                         "--ray-actors=2"))  # fmt: skip
    return results, out


def test_two_actors_store_a_single_processs_bytes(single, distributed):
    (alone, alone_out), (results, out) = single, distributed
    # 4 entries of 40 queries, and 3 rotated ones of 40 samples x 3 other orders of 4 options
    assert ray_note(out) == {"chunks": CHUNKS, "queries": 4 * 40 + 3 * 40 * 3, "actors": 2,
                             "redone": 0, "duplicates": 0, "already": 0}  # fmt: skip
    expected = digests(alone)
    # clean, fog-1, gaussian_noise-1, their rotations (order.*), vsi, and two sample tables
    assert len(expected) == 9
    assert digests(results) == expected
    assert outcomes(out) == outcomes(alone_out) and outcomes(out)
    # the device class is in the run key: another folder than the single process's
    assert not set(p.name for p in results.glob("*/*")) & set(p.name for p in alone.glob("*/*"))


def test_killed_actors_lose_no_chunk_and_change_no_byte(work, single, cluster_address):
    """One actor's process is SIGKILLed after its 2nd chunk, the other ``ray.kill``ed while
    it holds a leased chunk: both restart, the lost chunks are leased again (counted)."""
    import ray

    from benchc.engine.ray import Cluster
    from benchc.spec import order_conditions
    from benchc.suite.collect import stored_entries
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import SuiteSession

    results = work / "killed"
    cfg = SuiteConfig(model=str(work / "tiny-vlm"), corruptions=("fog", "gaussian_noise"),
                      severities=(1,), limit=40, batch_size=4, results_dir=results,
                      cache_dir=work / "cache", executor="ray", ray_actors=2)  # fmt: skip
    state = SuiteSession(cfg)
    state.planned_conditions = cfg.conditions
    state.planned_rotations = order_conditions(cfg.conditions)  # what family cases read
    returned = {0: 0, 1: 0}
    killed: list[str] = []
    with Cluster.start(state, vsi=True) as cluster:

        def kill(i: int, chunk) -> None:
            returned[i] += 1
            if i == 0 and returned[0] == 2 and "sigkill" not in killed:
                os.kill(cluster.reports[0]["pid"], signal.SIGKILL)
                killed.append("sigkill")
            if i == 1 and "ray.kill" not in killed and cluster.queue.held_by(1):
                ray.kill(cluster.actors[1], no_restart=False)
                killed.append("ray.kill")

        cluster.on_result = kill
        cluster.fill(stored_entries(state, grid=True, vsi=True))
        assert killed == ["sigkill", "ray.kill"] or killed == ["ray.kill", "sigkill"]
        assert cluster.queue.redone >= 1  # the ray.kill'ed actor held a chunk
        assert cluster.queue.stored == CHUNKS
        assert f"{cluster.queue.redone} redone" in state.backend.notes()[-1]
    assert digests(results) == digests(single[0])


def test_a_killed_driver_resumes_from_the_store(work, single, cluster_address):
    results = work / "resumed"
    driver = suite(work, results, "--executor=ray", f"--ray-address={cluster_address}",
                   "--ray-actors=2")  # fmt: skip
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and driver.poll() is None:
        if len(list(results.glob("*/*/.parts/*/*.npz"))) >= 2:
            break
        time.sleep(0.05)
    driver.send_signal(signal.SIGKILL)
    driver.communicate()
    out = finished(suite(work, results, "--executor=ray", f"--ray-address={cluster_address}",
                         "--ray-actors=2"))  # fmt: skip
    note = ray_note(out)
    assert note["already"] >= 2, "the driver finished before it could be killed"
    assert note["chunks"] + note["already"] == CHUNKS  # only the remaining ones were scored
    assert digests(results) == digests(single[0])


def test_from_store_gates_without_the_model(work, distributed):
    results, out = distributed
    for weights in (work / "tiny-vlm").glob("*.safetensors"):
        weights.unlink()  # no forward pass is possible: there is no model
    gated = finished(suite(work, work / "unused", f"--from-store={results}"))
    assert outcomes(gated) == outcomes(out)
    assert f"from store: {results} (7 entries read, no query scored)" in gated
    assert "throughput:" not in gated and "ray:" not in gated
    # a store lacking chunks: one line naming them, nothing computed
    partial = work / "partial"
    shutil.copytree(results, partial)
    (fog,) = partial.glob("*/testbed-*/fog-1.npz")
    fog.unlink()
    proc = suite(work, work / "unused", f"--from-store=file://{partial}")
    text, _ = proc.communicate(timeout=600)
    assert proc.returncode == 4, text[-3000:]
    assert re.search(r"--from-store file://\S+: 3 chunk\(s\) not stored: fog-1 rows 0-15, "
                     r"16-31, 32-39 \(compute them first", text), text[-3000:]  # fmt: skip


def test_out_of_memory_fails_the_run_with_the_fix_and_stores_nothing(work, cluster_address):
    """The backend split a batch after an OOM (its own recovery in one process): an actor's
    chunk would then be batched unlike its run key, so the run stops with the batch size that
    fits and nothing of that chunk is stored."""
    from benchc.engine import EngineError
    from benchc.engine.ray import Cluster
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import SuiteSession

    results = work / "oom"
    cfg = SuiteConfig(model="benchc_tests.cluster.oom:TwoRowsFit", corruptions=("fog",),
                      severities=(1,), limit=8, batch_size=4, results_dir=results,
                      cache_dir=work / "cache", executor="ray", ray_actors=1)  # fmt: skip
    state = SuiteSession(cfg)
    with Cluster.start(state, vsi=False) as cluster, pytest.raises(EngineError) as info:
        cluster.fill({"grid": ["clean"]})
    message = str(info.value)
    assert "\n" not in message
    assert "batch size 4 ran out of device memory, 2 fit; rerun with --batch-size=2" in message
    assert not list(results.rglob("clean*.npz"))  # no part, no entry
