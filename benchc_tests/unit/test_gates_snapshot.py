"""The syrupy threshold extension: file layout, naming and the tolerance comparator."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchc.gates import Figure, Payload, parse_rule
from benchc.gates.snapshot import (
    ThresholdExtension,
    case_name,
    cell_file,
    extension_for,
    model_slug,
)


def _payload(value: float) -> Payload:
    return Payload(
        scope="fog-3",
        model="tiny-vlm",
        dataset="testbed",
        n=2,
        figures={"ras": Figure(value, 0.0, "ras")},
        rules=[parse_rule("ras:higher:floor=0.05:z=3")],
        ids=("a", "b"),
        per_sample={"ras": [value, value]},
    )


def test_case_names_keep_the_test_name():
    assert case_name("test_cell[gaussian_noise-3]") == "test_cell-gaussian_noise-3"
    assert case_name("TestX.test_model[ras]") == "test_model-ras"
    assert case_name("test_sample[fog-1-a/b c]") == "test_sample-fog-1-a_b_c"
    assert cell_file("fog-3") == "test_cell-fog-3.json"


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


def test_comparator_is_one_sided_with_tolerance():
    ext = extension_for("t", "m", update=False)()
    base = _payload(0.30).to_json()
    assert ext.matches(serialized_data=_payload(0.27).to_json(), snapshot_data=base)
    assert ext.matches(serialized_data=_payload(0.90).to_json(), snapshot_data=base)
    assert not ext.matches(serialized_data=_payload(0.20).to_json(), snapshot_data=base)
    text = "\n".join(ext.diff_lines(_payload(0.20).to_json(), base))
    assert "gate FAIL: ras in fog-3" in text and "tolerance 0.0500" in text


def test_update_mode_records_any_change():
    ext = extension_for("t", "m", update=True)()
    base = _payload(0.30).to_json()
    assert ext.matches(serialized_data=base, snapshot_data=base)
    assert not ext.matches(serialized_data=_payload(0.31).to_json(), snapshot_data=base)


def test_serializer_refuses_other_data():
    ext = extension_for("t", "m", update=False)()
    with pytest.raises(TypeError, match="benchc Payloads"):
        ext.serialize({"ras": 1})
    assert ext.serialize(_payload(0.1)) == _payload(0.1).to_json()
