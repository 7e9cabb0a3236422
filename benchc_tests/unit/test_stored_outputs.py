"""The stored outputs of the embedded model and of every tiny architecture family are the
recorded ones (``benchmarks/stored_outputs_digest.json`` and ``stored_outputs_reference.npz``):
byte-identical on the machine they were recorded on, within float noise on any other. Runs the
real suite once per model in a fresh process (~4 min on 2 cores): marked ``architectures``, with
the architecture matrix. The record's integrity and the comparison's two modes are checked in
the default run."""

from __future__ import annotations

import copy
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from benchc.results.store import DIGEST_KEY, content_digest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stored_outputs_digest.py"


def _digest_module():
    spec = importlib.util.spec_from_file_location("stored_outputs_digest", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_record_covers_every_target_and_its_arrays_are_the_digested_ones() -> None:
    digest = _digest_module()
    record = digest.load()
    assert sorted(record["runs"]) == digest.targets() == sorted(record["digests"])
    assert set(record["numerics"]) >= {"torch", "transformers", "cpu_isa"}
    for name, files in record["runs"].items():
        assert files and sorted(files) == sorted(record["digests"][name])
        for key, arrays in files.items():
            assert digest.array_digest(arrays) == record["digests"][name][key], f"{name}/{key}"


def _moved(record: dict, fraction: float) -> dict:
    """The record's runs with the embedded clean logits moved by ``fraction`` of their scale."""
    runs = copy.deepcopy(record["runs"])
    arrays = runs["embedded"]["tiny-vlm/testbed/clean.npz"]
    logits = arrays["option_logits"]
    scale = max(float(np.abs(logits).max()), 1.0)
    arrays["option_logits"] = (logits + np.float32(fraction * scale)).astype(logits.dtype)
    # As the store writes it: its checksum moves with the bits it covers.
    arrays[DIGEST_KEY] = np.array(
        content_digest({k: v for k, v in arrays.items() if k != DIGEST_KEY})
    )
    return runs


def test_another_machines_noise_passes_and_a_changed_number_does_not() -> None:
    digest = _digest_module()
    record = digest.load()
    assert digest.compare(record["runs"], record, exact=True) == []
    assert digest.compare(record["runs"], record, exact=False) == []
    # 1.3e-6 of the scale: the most that forcing AVX2 kernels moved a float on the recording
    # machine. A machine's noise is no difference off it, and one on it.
    noise = _moved(record, 1.3e-6)
    assert digest.compare(noise, record, exact=False) == []
    [line] = digest.compare(noise, record, exact=True)
    assert line.startswith("embedded/tiny-vlm/testbed/clean.npz: ")
    # A change of the code moves numbers by far more: caught on any machine.
    [line] = digest.compare(_moved(record, 1e-4), record, exact=False)
    assert "option_logits: moved by" in line
    runs = copy.deepcopy(record["runs"])
    vsi = runs["embedded"]["tiny-vlm/vsi-set/vsi-aligned.npz"]
    vsi["top1_clean"] = vsi["top1_clean"] + (np.arange(vsi["top1_clean"].size) == 3)
    assert digest.compare(runs, record, exact=False) == [
        "embedded/tiny-vlm/vsi-set/vsi-aligned.npz: top1_clean: 1 of 1000 entries differ"
    ]
    del runs["embedded"]["tiny-vlm/testbed/fog-1.npz"]
    assert "embedded/tiny-vlm/testbed/fog-1.npz: not stored" in digest.compare(
        runs, record, exact=False
    )


@pytest.mark.architectures
def test_stored_outputs_are_the_recorded_ones() -> None:
    digest = _digest_module()
    exact, diff = digest.check(digest.compute())
    how = "byte for byte" if exact else "within float noise (numerics differ from the record's)"
    assert not diff, f"compared {how}:\n" + "\n".join(diff)
