"""``benchc push``: a results store copied to an fsspec URL reads back byte for byte through
``--from-store``'s reader, a rerun copies only what changed, and nothing but stored files goes
(no locks, claims or a writer's temporary files). fsspec's in-memory filesystem stands in for
an object store."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from benchc.cli import main
from benchc.engine.stored import local_copy, push, stored_runs
from benchc.results import StoreError
from benchc_tests.unit.report_runs import make_dataset, make_run


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def store(tmp_path) -> Path:
    root = tmp_path / "results"
    run = make_run(root, make_dataset(tmp_path / "ds", n=8))
    parts = run / ".parts" / "pixelate-1"  # an unfinished entry: its parts travel, for resuming
    parts.mkdir(parents=True)
    np.savez(parts / f"{0:09d}.npz", option_logits=np.zeros((4, 4), np.float32))
    (parts / "claims").mkdir()
    (parts / "claims" / f"{4:09d}").write_text("{}")
    (run / ".locks").mkdir()
    (run / ".locks" / "clean.lock").write_text("")
    (run / ".clean.npz.abc.tmp").write_bytes(b"half")
    return root


def test_a_pushed_store_reads_back_byte_for_byte(store):
    url = f"memory://benchc-{uuid.uuid4().hex}/store"
    copied, kept = push(store, url)
    back = local_copy(url)
    sent = _files(back)
    here = _files(store)
    wanted = {k: v for k, v in here.items() if not any(
        s in k for s in ("/.locks/", "/claims/", ".tmp"))}  # fmt: skip
    assert sent == wanted and copied == len(wanted) and kept == 0
    assert any("/.parts/pixelate-1/" in k for k in sent)
    assert [key.model_name for key, _ in stored_runs(back)] == ["toy-vlm"]

    # a rerun keeps the entries already there and copies the manifests again
    copied, kept = push(store, url)
    assert copied == sum(k.endswith("manifest.json") for k in wanted)
    assert kept == len(wanted) - copied


def test_the_command_says_what_it_copied_and_refuses_what_it_cannot(store, tmp_path, capsys):
    url = f"memory://benchc-{uuid.uuid4().hex}/s"
    assert main(["push", str(store), url]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"pushed {store} to {url}: ") and "0 already there" in out
    assert main(["push", str(tmp_path / "ds"), url]) == 4  # usage: a folder without a stored run
    assert "no benchc results folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["push", str(tmp_path / "missing"), url])
    with pytest.raises(StoreError, match="not a store location"):
        push(store, "nosuchscheme-xyz://a/b")
