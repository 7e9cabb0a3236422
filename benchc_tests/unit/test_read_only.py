"""Issue 40: a store, baseline or dataset benchc only reads is never changed, whatever it holds.

Every read path -- ``benchc report`` (with and without ``--baseline``), ``benchc compare``,
``benchc history``, ``benchc push``'s source, the ``--from-store`` reader and the dataset
loaders -- runs over an intact and a damaged input (one truncated array file); each input's
bytes are compared before and after (:mod:`benchc_tests.unit.untouched`). A damaged file read
through ``--from-store`` is an error naming it and the command that mends it; repair happens
only in a writable store, said in one summary line.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from benchc.cli import EXIT_OK, EXIT_UNREADABLE, main
from benchc.results import ResultStore, RunKey, StoreError
from benchc.results.store import chunk_bounds
from benchc_tests.unit.report_runs import make_dataset, make_run, record_baseline
from benchc_tests.unit.untouched import assert_untouched, tree


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    """Two stored runs of two models on one JSONL dataset, a TSV copy of it, and a thresholds
    folder holding the first model's baseline."""
    root = tmp_path_factory.mktemp("readonly")
    ds = make_dataset(root / "ds", n=12)
    a = make_run(root / "results", ds, model="toy-vlm")
    b = make_run(root / "results", ds, model="toy-vlm-2", damp=0.5)
    record_baseline(a, root / "thresholds", model="toy-vlm")
    from benchc.data import load_dataset
    from benchc.data.tsv import save_tsv

    (root / "tsv").mkdir()
    save_tsv(load_dataset(ds).samples, root / "tsv" / "ds.tsv")
    return {"root": root, "ds": ds, "a": a, "b": b, "results": root / "results",
            "thresholds": root / "thresholds", "tsv": root / "tsv"}  # fmt: skip


def _damaged(world: dict[str, Path], tmp_path: Path) -> dict[str, Path]:
    """A copy of the results with one truncated array file (a power loss mid-copy)."""
    results = tmp_path / "damaged"
    shutil.copytree(world["results"], results)
    a = results / world["a"].relative_to(world["results"])
    b = results / world["b"].relative_to(world["results"])
    fog = a / "fog-1.npz"
    fog.write_bytes(fog.read_bytes()[:100])
    return {**world, "results": results, "a": a, "b": b}


def _report(w: dict[str, Path], out: Path) -> int:
    return main(["report", str(w["a"]), "--out", str(out), "--no-images"])


def _report_baseline(w: dict[str, Path], out: Path) -> int:
    return main(["report", str(w["a"]), "--out", str(out), "--no-images",
                 "--baseline", str(w["thresholds"])])  # fmt: skip


def _compare(w: dict[str, Path], out: Path) -> int:
    return main(["compare", str(w["a"]), str(w["b"]), "--out", str(out), "--no-images"])


def _history(w: dict[str, Path], out: Path) -> int:
    return main(["history", str(w["thresholds"]), "--json", str(out / "h.json")])


def _push(w: dict[str, Path], out: Path) -> int:
    return main(["push", str(w["results"]), f"memory://benchc-{uuid.uuid4().hex}/s"])


def _datasets(w: dict[str, Path], out: Path) -> int:
    from benchc.data import load_dataset

    for path in (w["ds"], w["tsv"] / "ds.tsv"):
        ds = load_dataset(path)
        for sample in ds.samples:
            sample.image().load()
    return EXIT_OK


READ_PATHS: dict[str, Callable[[dict[str, Path], Path], int]] = {
    "report": _report,
    "report --baseline": _report_baseline,
    "compare": _compare,
    "history": _history,
    "push source": _push,
    "datasets": _datasets,
}
#: What each read path answers on the damaged results (the datasets and thresholds are intact).
ON_DAMAGED = {"report": EXIT_UNREADABLE, "report --baseline": EXIT_UNREADABLE,
              "compare": EXIT_UNREADABLE, "history": EXIT_OK, "push source": EXIT_OK,
              "datasets": EXIT_OK}  # fmt: skip


#: Building a page takes seconds: those read paths over intact runs are in ``-m slow``.
BUILDS_A_PAGE = ("report", "report --baseline", "compare")
CASES = [
    pytest.param(name, damaged, id=f"{name}-{'damaged' if damaged else 'intact'}",
                 marks=[pytest.mark.slow] if name in BUILDS_A_PAGE and not damaged else [])
    for name in READ_PATHS for damaged in (False, True)
]  # fmt: skip


@pytest.mark.parametrize(("name", "damaged"), CASES)
def test_a_read_path_changes_no_byte(world, tmp_path, capsys, name, damaged):
    w = _damaged(world, tmp_path) if damaged else world
    read = [w["results"], w["thresholds"], w["ds"], w["tsv"]]
    before = [tree(p) for p in read]
    rc = READ_PATHS[name](w, tmp_path / "out")
    err = capsys.readouterr().err
    assert rc == (ON_DAMAGED[name] if damaged else EXIT_OK), err
    if rc == EXIT_UNREADABLE:
        assert "fog-1.npz" in err  # the damaged file, named
    for snapshot, path in zip(before, read, strict=True):
        assert_untouched(snapshot, path)


# -- the --from-store reader -------------------------------------------------------------------
def _key() -> RunKey:
    return RunKey("m", "d", {"seed": 0}, model_name="m", dataset_name="d")


def _rows(start: int, stop: int) -> dict[str, np.ndarray]:
    return {"x": np.arange(start, stop, dtype=np.int64)}


def _written(root: Path) -> ResultStore:
    store = ResultStore(root, _key())
    store.get_or_compute("fog-1", 8, 4, _rows)  # a finished entry
    for start, stop in chunk_bounds(8, 4):  # an unfinished one: its two chunks as parts
        store.save_part("fog-2", start, _rows(start, stop))
    return store


def test_the_from_store_reader_merges_nothing_and_takes_no_lock(tmp_path):
    _written(tmp_path)
    before = tree(tmp_path)
    store = ResultStore(tmp_path, _key(), read_only="--from-store x")
    assert store.missing_chunks("fog-2", 8, 4) == []
    assert store.get_or_compute("fog-2", 8, 4, _rows)["x"].tolist() == list(range(8))
    assert store.get_or_compute("fog-1", 8, 4, _rows)["x"].tolist() == list(range(8))
    assert_untouched(before, tmp_path)  # no merged fog-2.npz, no .locks, parts kept
    with pytest.raises(StoreError, match=r"--from-store x: fog-3\[0:4\] is not stored"):
        store.get_or_compute("fog-3", 8, 4, _rows)
    with pytest.raises(StoreError, match="only read"):
        store.save("fog-3", _rows(0, 8))
    assert_untouched(before, tmp_path)


@pytest.mark.parametrize("what", ["entry", "part"])
def test_a_damaged_file_read_from_a_store_is_named_and_kept(tmp_path, what):
    store = _written(tmp_path)
    damaged = (
        store.path("fog-1") if what == "entry" else store._parts_dir("fog-2") / "000000004.npz"
    )
    damaged.write_bytes(damaged.read_bytes()[:100])
    before = tree(tmp_path)
    reader = ResultStore(tmp_path, _key(), read_only="--from-store s3://b/store")
    name = "fog-1" if what == "entry" else "fog-2"
    with pytest.raises(StoreError) as info:
        reader.missing_chunks(name, 8, 4)
    message = str(info.value)
    assert "\n" not in message and str(damaged) in message
    assert "left as it is" in message
    assert f"--results-dir {tmp_path} instead of --from-store" in message
    assert "benchc push" in message
    with pytest.raises(StoreError, match="unreadable result file"):
        reader.get_or_compute(name, 8, 4, _rows)
    assert_untouched(before, tmp_path)
    assert reader.repaired == []

    # the same store as a run's own --results-dir: repaired, and said on one line
    writer = ResultStore(tmp_path, _key())
    assert writer.get_or_compute(name, 8, 4, _rows)["x"].tolist() == list(range(8))
    assert [p for p, _ in writer.repaired] == [damaged]
    assert writer.repair_note() == (
        f"repaired: 1 damaged stored file(s) of {writer.run_dir} recomputed "
        f"({damaged.relative_to(writer.run_dir).as_posix()})"
    )
