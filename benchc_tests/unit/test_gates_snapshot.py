"""The syrupy threshold extension: file layout, naming and the tolerance comparator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchc.gates import Figure, GridEvidence, Payload, parse_rule, sidecar
from benchc.gates.evidence import EvidenceError
from benchc.gates.snapshot import (
    ThresholdExtension,
    case_name,
    extension_for,
    model_slug,
)


def _evidence(shift: float, n: int = 20) -> GridEvidence:
    """``n`` samples, all right when clean; ``shift`` moves the right answer's fog-3 logit."""
    answers = np.arange(n) % 2
    clean = np.zeros((n, 4), np.float32)
    clean[np.arange(n), answers] = 3.0
    fog = clean.copy()
    fog[np.arange(n), answers] += shift
    return GridEvidence.from_conditions(
        [f"s{i}" for i in range(n)], answers, np.full(n, 4), clean, {"fog-3": fog}
    )


def _payload(shift: float) -> Payload:
    ev = _evidence(shift)
    return Payload(
        scope="fog-3",
        level="cell",
        model="tiny-vlm",
        dataset="testbed",
        n=20,
        figures={"ras": Figure(ev.figures()["ras"])},
        rules=(parse_rule("ras:higher:floor=0.05"),),
        evidence=ev,
    )


def _recorded(root: Path, payload: Payload) -> str:
    """What ``--snapshot-update`` leaves: the sidecar in ``arrays/`` and the JSON text."""
    sidecar.save(root / "m", payload.evidence)
    return extension_for(root, "m", update=True)().serialize(payload)


def test_case_names_keep_the_test_name():
    assert case_name("test_cell[gaussian_noise-3]") == "test_cell-gaussian_noise-3"
    assert case_name("TestX.test_model[ras]") == "test_model-ras"
    assert case_name("test_sample[fog-1-a/b c]") == "test_sample-fog-1-a_b_c"


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("tiny-vlm", "tiny-vlm"),
        ("Qwen/Qwen2.5-VL-3B-Instruct", "qwen--qwen2.5-vl-3b-instruct"),
        ("/abs/path/My Model/", "abs--path--my-model"),
    ],
)
def test_model_slug(name, slug):
    assert model_slug(name) == slug


def test_model_slug_rejects_empty():
    with pytest.raises(ValueError, match="empty name"):
        model_slug("///")


def test_extension_binds_root_slug_and_mode(tmp_path):
    ext = extension_for(tmp_path, "tiny-vlm", update=False)
    assert issubclass(ext, ThresholdExtension)
    assert Path(ext.dirname(test_location=None)) == tmp_path / "tiny-vlm"
    assert ext.file_extension == "json"
    assert ext.update is False and extension_for(tmp_path, "x", update=True).update is True


def test_syrupy_only_writes_the_engine_decides(tmp_path):
    """syrupy's comparator is no way to decide a gate: it matches equal bytes only (what a
    recording writes), and says the gate engine checks snapshots."""
    ext = extension_for(tmp_path, "m", update=False)()
    base = _recorded(tmp_path, _payload(0.0))
    assert ext.matches(serialized_data=base, snapshot_data=base)
    small = ext.serialize(_payload(-0.01))  # a change a gate would pass: still not "equal"
    assert not ext.matches(serialized_data=small, snapshot_data=base)
    assert "gate engine" in "\n".join(ext.diff_lines(small, base))


def test_a_damaged_or_missing_sidecar_is_a_clear_error(tmp_path):
    base = _recorded(tmp_path, _payload(0.0))
    (path,) = (tmp_path / "m" / "arrays").glob("*.npz")
    ok = Payload.from_json(base)
    assert sidecar.load(tmp_path / "m", ok.evidence_file, ok.evidence_digest, where="x").ids
    other = _evidence(1.0)
    from benchc.results.store import atomic_save_npz

    atomic_save_npz(path, other.arrays())  # valid file, wrong content
    with pytest.raises(EvidenceError, match="does not hold the recorded arrays"):
        sidecar.load(tmp_path / "m", ok.evidence_file, ok.evidence_digest, where="x")
    path.write_bytes(b"not a zip")
    with pytest.raises(EvidenceError, match="unreadable"):
        sidecar.load(tmp_path / "m", ok.evidence_file, ok.evidence_digest, where="x")
    path.unlink()
    with pytest.raises(EvidenceError, match="missing"):
        sidecar.load(tmp_path / "m", ok.evidence_file, ok.evidence_digest, where="x")


def test_sweep_keeps_referenced_sidecars_only(tmp_path):
    kept = sidecar.save(tmp_path, _evidence(0.0))
    gone = sidecar.save(tmp_path, _evidence(1.0))
    assert sidecar.save(tmp_path, _evidence(0.0)) == kept  # content-addressed: stored once
    foreign = tmp_path / "arrays" / ("0" * 20 + ".npz")  # benchc's shape, not benchc's file
    foreign.write_bytes(b"someone else's")
    assert sidecar.sweep(tmp_path, [kept], [kept, gone]) == [tmp_path / gone]
    assert (tmp_path / kept).is_file() and foreign.read_bytes() == b"someone else's"


def test_update_mode_records_any_change(tmp_path):
    ext = extension_for(tmp_path, "m", update=True)()
    base = ext.serialize(_payload(0.0))
    assert ext.matches(serialized_data=base, snapshot_data=base)
    assert not ext.matches(serialized_data=ext.serialize(_payload(0.5)), snapshot_data=base)


def test_serializer_refuses_other_data():
    ext = extension_for("t", "m", update=False)()
    with pytest.raises(TypeError, match="benchc Payloads"):
        ext.serialize({"ras": 1})
    assert b'"evidence"' in ext.serialize(_payload(0.1))
