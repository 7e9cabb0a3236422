"""The pure parts of the distributed executor (no Ray): the lease queue's rules, the device
class check, the stand-in model and the search of a finished store (``--from-store``)."""

from __future__ import annotations

import numpy as np
import pytest

from benchc.engine.devices import DeviceMismatch, agreed, describe, device_class
from benchc.engine.leases import MAX_LOSSES, ChunkRef, LeaseQueue, LostTooOften
from benchc.engine.stored import StandIn, is_url, local_copy, stored_runs
from benchc.results import ResultStore, RunKey


def _chunks(name: str, n: int, run: str = "grid") -> list[ChunkRef]:
    return [ChunkRef(run, name, s, s + 4) for s in range(0, 4 * n, 4)]


def test_leases_are_short_runs_of_one_entry():
    queue = LeaseQueue(_chunks("clean", 3) + _chunks("fog-1", 2), run_length=2)
    assert queue.lease("a") == _chunks("clean", 2)
    assert queue.lease("b") == _chunks("clean", 3)[2:]  # the entry ends: a shorter run
    assert [c.name for c in queue.lease("c")] == ["fog-1", "fog-1"]
    assert queue.lease("a") == []
    assert queue.left("grid", "clean") == 3 and not queue.finished


def test_a_dead_holders_chunks_go_back_first_and_count_as_redone():
    queue = LeaseQueue(_chunks("clean", 4), run_length=2)
    first = queue.lease("a")
    queue.lease("b")
    assert queue.done(first[0])
    for chunk in queue.held_by("a"):
        queue.give_back(chunk)
    assert queue.redone == 1
    assert queue.lease("c") == [first[1]]  # the lost chunk is leased before anything else
    queue.give_back(first[0])  # returned already: nothing to give back
    assert queue.redone == 1


def test_duplicates_are_counted_and_not_stored_twice():
    queue = LeaseQueue(_chunks("clean", 1))
    (chunk,) = queue.lease("a")
    assert queue.done(chunk) is True
    assert queue.done(chunk) is False
    assert queue.duplicates == 1 and queue.finished and queue.stored == 1


def test_a_chunk_lost_too_often_stops_the_run():
    queue = LeaseQueue(_chunks("clean", 1))
    with pytest.raises(LostTooOften, match=r"chunk clean\[0:4\] was lost 4 times"):
        for _ in range(MAX_LOSSES + 1):
            (chunk,) = queue.lease("a")
            queue.give_back(chunk)


def test_device_classes_must_agree():
    cpu = {"kind": "cpu", "torch": "2.13.0", "threads": "1"}
    h200 = {"kind": "cuda", "gpu": "NVIDIA H200", "cuda": "12.8", "capability": "9.0"}
    reports = [{"device_class": cpu}, {"device_class": dict(cpu)}]
    assert agreed(reports, "device_class", "device class") == cpu
    with pytest.raises(DeviceMismatch) as info:
        agreed([{"device_class": cpu}, {"device_class": h200}], "device_class", "device class")
    assert str(info.value).startswith(
        "actors disagree on the device class: actor 0 has cpu threads=1 torch=2.13.0, actor 1 "
        "has cuda capability=9.0 cuda=12.8 gpu=NVIDIA H200"
    )
    assert describe(h200) == "cuda capability=9.0 cuda=12.8 gpu=NVIDIA H200"


def test_device_class_of_a_cpu_model_and_of_a_server():
    import torch

    class Local:
        device = torch.device("cpu")

    cls = device_class(Local())
    assert cls["kind"] == "cpu" and cls["torch"] == torch.__version__
    assert cls["threads"] == str(torch.get_num_threads())
    assert device_class(object()) == {"kind": "server"}


def test_the_stand_in_computes_nothing():
    model = StandIn(name="m", fingerprint="hf:m", batch_size=8, where="--from-store s3://b")
    with pytest.raises(RuntimeError, match=r"results come from --from-store s3://b; nothing"):
        model.forward([])
    assert model.capabilities.white_box and model.batch_size == 8


def test_stored_runs_are_found_by_their_manifest(tmp_path):
    key = RunKey("hf:m", "data-fp", {"seed": 0, "batch_size": 8}, "m", "testbed")
    store = ResultStore(tmp_path / "store", key)
    store.save("clean", {"x": np.zeros(3)})
    store.write_manifest({"model_spec": "org/m"})
    assert stored_runs(tmp_path / "store") == [(key, store.manifest())]
    (store.run_dir / "manifest.json").write_text("{}")  # damaged: not a run
    assert stored_runs(tmp_path / "store") == []


def test_a_store_url_is_read_through_fsspec(tmp_path):
    key = RunKey("hf:m", "data-fp", {"seed": 0}, "m", "testbed")
    store = ResultStore(tmp_path / "store", key)
    store.save("clean", {"x": np.arange(3)})
    store.write_manifest({"model_spec": "org/m"})
    assert is_url("file:///x") and not is_url("/x")
    local = local_copy(f"file://{tmp_path / 'store'}")
    copy = ResultStore(local, key)
    np.testing.assert_array_equal(copy.load("clean")["x"], np.arange(3))
    assert copy.manifest_ok()


def test_the_stored_run_is_picked_by_model_dataset_and_settings(tmp_path):
    from types import SimpleNamespace

    from benchc.engine.stored import pick_run
    from benchc.results import StoreError
    from benchc.suite.config import SuiteConfig

    def run(model_fp: str, batch: int, spec: str) -> tuple[RunKey, dict]:
        settings = {"seed": 0, "image_size": 448, "batch_size": batch}
        return RunKey(model_fp, "data-fp", settings, "my-vlm", "testbed"), {"model_spec": spec}

    dataset = SimpleNamespace(fingerprint="data-fp", name="testbed")
    cfg = SuiteConfig(model="/ci/checkout/my-vlm", dataset="hub/set", image_size=448)
    one = run("hf:a", 16, "/cluster/models/my-vlm")  # the same folder name, mounted elsewhere
    assert pick_run([one], cfg, dataset, "s3://b") == one
    with pytest.raises(StoreError, match=r"no run of --model '/ci/checkout/other'"):
        pick_run([one], SuiteConfig(model="/ci/checkout/other", image_size=448), dataset, "x")
    two = run("hf:a2", 8, "/cluster/models/my-vlm")
    with pytest.raises(StoreError, match=r"several runs .* pass --batch-size"):
        pick_run([one, two], cfg, dataset, "s3://b")
    from dataclasses import replace

    assert pick_run([one, two], replace(cfg, batch_size=8), dataset, "s3://b") == two
