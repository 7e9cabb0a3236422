"""One out-of-tree extension of each kind -- backend, executor, exporter, results store --
installed from a temporary folder as a third party's package is (a dist-info with entry
points on ``sys.path``) and run through the suite; nothing is monkeypatched into benchc.

Two suite runs on a 1-cell grid of 8 samples: the first with the package's backend
(``--model=extecho:...``), its executor (``--executor=extexec``) and its exporter
(``--export=extexp=<folder>``) records the baseline; the second gates on that run's store
read through the package's store (``--from-store=extstore://<folder>``), with no model loaded.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchc.registry import BACKENDS, EXECUTORS, EXPORTERS, STORES, UnknownExtension
from benchc_tests.unit.extensions import install
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]

#: The extension package: one module, one of each kind (each well under 30 lines).
EXT = '''
import contextlib, json, shutil
from pathlib import Path
import numpy as np
from benchc.models.base import Backend, BatchOutput

class EchoBackend(Backend):
    """Answers by the image's mean brightness: deterministic, no weights."""
    model_args_schema = {}
    def __init__(self, rest, *, batch_size=4, **standard):
        self.name, self.fingerprint, self.batch_size = f"echo-{rest}", f"echo:{rest}", batch_size
    def forward(self, queries, *, distribution=False, top_k=None):
        k = max(len(q.options) for q in queries)
        logits = np.full((len(queries), k), np.nan, np.float32)
        for i, q in enumerate(queries):
            logits[i, : len(q.options)] = 0.0
            logits[i, int(q.image.mean()) % len(q.options)] = 4.0
        return BatchOutput(logits, np.ones(len(queries), np.float32))

@contextlib.contextmanager
def executor(state, *, vsi):
    Path(__file__).with_name("extexec.json").write_text(json.dumps({"vsi": vsi}))
    yield lambda entries: None

def export(bundle, target, *, local_dir):
    Path(target).mkdir(parents=True, exist_ok=True)
    (Path(target) / "exported.json").write_text(json.dumps({"model": bundle.model}))
    return target

class Store:
    def read(self, url):
        root = Path(url.removeprefix("extstore://"))
        Path(__file__).with_name("extstore-read").write_text(url)
        return root
    def write(self, root, url):
        shutil.copytree(root, url.removeprefix("extstore://"), dirs_exist_ok=True)
        return 1, 0

STORE = Store()
'''

ENTRY_POINTS = {
    "benchc.backends": {"extecho": "benchc_ext_mod:EchoBackend"},
    "benchc.executors": {"extexec": "benchc_ext_mod:executor"},
    "benchc.exporters": {"extexp": "benchc_ext_mod:export"},
    "benchc.stores": {"extstore": "benchc_ext_mod:STORE"},
}


@pytest.fixture
def extension(tmp_path, monkeypatch) -> Path:
    return install(monkeypatch, tmp_path / "ext", ENTRY_POINTS, {"benchc_ext_mod.py": EXT})


def test_each_kind_is_found_by_name_and_benchcs_own_are_entry_points_too(extension) -> None:
    for registry, name in [
        (BACKENDS, "extecho"),
        (EXECUTORS, "extexec"),
        (EXPORTERS, "extexp"),
        (STORES, "extstore"),
    ]:
        assert name in registry.names()
        assert registry.load(name) is not None
    for registry, own in [
        (BACKENDS, {"hf", "openai"}),
        (EXECUTORS, {"local", "ray", "stored"}),
        (EXPORTERS, {"wandb", "mlflow", "push_to_hub"}),
        (STORES, {"fsspec"}),
    ]:
        eps = registry.entry_points()
        assert own <= set(eps)
        assert {eps[n].dist.metadata["Name"] for n in own} == {"benchc"}
    with pytest.raises(UnknownExtension, match=r"unknown executor 'dask'; known: .*extexec"):
        EXECUTORS.load("dask")


def test_push_and_read_through_an_extension_store(extension, tmp_path) -> None:
    from benchc.engine.stored import push, store_for

    assert store_for("extstore://x") is STORES.load("extstore")
    assert store_for("memory://x") is STORES.load("fsspec")
    src = tmp_path / "src" / "m" / "d-0"
    src.mkdir(parents=True)
    (src / "manifest.json").write_text("{}")
    assert push(tmp_path / "src", f"extstore://{tmp_path / 'dst'}") == (1, 0)
    assert (tmp_path / "dst" / "m" / "d-0" / "manifest.json").is_file()


@pytest.mark.slow  # two suite runs of a weightless backend (~10 s)
def test_every_kind_runs_through_the_suite(extension, pytester, tmp_path) -> None:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    data = tmp_path / "data"
    save_jsonl([s for s in generate(30, 7) if s.k == 4][:8], data)
    project = make_suite_project(pytester)
    root = project.path
    common = [
        "suite/test_cells.py",
        "--model=extecho:v1",
        f"--dataset={data}",
        "--corruptions=pixelate",
        "--severities=2",
        f"--cache-dir={root / 'cache'}",
        f"--thresholds-dir={root / 'thresholds'}",
        "-p",
        "no:randomly",
    ]
    results, exported = root / "results", root / "exported"
    first = project.runpytest_inprocess(
        *common,
        f"--results-dir={results}",
        "--executor=extexec",
        f"--export=extexp={exported}",
        "--snapshot-update",
    )
    assert first.ret == pytest.ExitCode.OK, first.stdout.str()[-3000:]
    assert json.loads((extension / "extexec.json").read_text()) == {"vsi": False}
    assert json.loads((exported / "exported.json").read_text()) == {"model": "echo-v1"}
    second = project.runpytest_inprocess(*common, f"--from-store=extstore://{results}")
    assert second.ret == pytest.ExitCode.OK, second.stdout.str()[-3000:]
    second.assert_outcomes(passed=1)
    assert (extension / "extstore-read").read_text() == f"extstore://{results}"
