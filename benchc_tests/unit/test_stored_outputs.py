"""The stored outputs of the embedded model and of every tiny architecture family are the ones
recorded before issue 41's refactors (``benchmarks/stored_outputs_digest.json``, from main
091b8b5): every stored array byte-identical. Runs the real suite once per model in a fresh
process (~6 min on 2 cores): marked ``architectures``, with the architecture matrix."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "stored_outputs_digest.py"


def _digest_module():
    spec = importlib.util.spec_from_file_location("stored_outputs_digest", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_covers_the_embedded_model_and_every_family() -> None:
    digest = _digest_module()
    recorded = json.loads(digest.REFERENCE.read_text())
    assert sorted(recorded) == digest.targets()
    assert all(recorded.values())


@pytest.mark.architectures
def test_stored_outputs_are_byte_identical_to_the_recorded_ones() -> None:
    digest = _digest_module()
    diff = digest.compare(digest.compute(), json.loads(digest.REFERENCE.read_text()))
    assert not diff, "\n".join(diff)
