"""The embedded VSI set: the committed folder loads, every sample has an annotated region, and
its build script still reproduces it (a 10-sample miniature, byte for byte)."""

from __future__ import annotations

import runpy
from pathlib import Path

from benchc.data import load_dataset

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_committed_vsi_set_loads_with_a_region_per_sample():
    ds = load_dataset(FIXTURES / "vsi-set")
    assert len(ds) == 1000
    assert all(s.region is not None for s in ds)


def test_build_script_reproduces_the_committed_set(tmp_path):
    build = runpy.run_path(str(FIXTURES / "build_vsi_set.py"))["build"]
    build(tmp_path, n=10)
    committed = (FIXTURES / "vsi-set" / "samples.jsonl").read_text().splitlines()
    rebuilt = (tmp_path / "samples.jsonl").read_text().splitlines()
    assert rebuilt == committed[:10]
    for path in sorted((tmp_path / "images").iterdir()):
        assert path.read_bytes() == (FIXTURES / "vsi-set" / "images" / path.name).read_bytes()
