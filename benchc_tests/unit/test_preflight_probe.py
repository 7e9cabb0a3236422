"""Issue 50: a model that cannot take its input stops in pre-flight, with one short message.

A processor size of 224 in front of the embedded model's 128 px tower loads fine and failed at
the first forward pass of every case. One real query (one sample, clean) through the backend's
own ``forward`` now turns it into one :class:`LoadError` naming the setting and both sizes, at
most 20 lines, no traceback; a changed but working preprocessing passes the pre-flight.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchc.suite.probe import MAX_LINES, message, probe, size_mismatch
from benchc.suite.session import LoadError

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "tiny-vlm"


def edited_copy(tmp_path: Path, name: str = "copy", **image_processor) -> Path:
    """The embedded model copied to ``tmp_path/name`` with ``image_processor`` keys set in its
    processor config (a configuration-only edit)."""
    copy = tmp_path / name
    shutil.copytree(FIXTURE, copy)
    path = copy / "processor_config.json"
    data = json.loads(path.read_text())
    data["image_processor"].update(image_processor)
    path.write_text(json.dumps(data, indent=2))
    return copy


def _state(model: Path) -> SimpleNamespace:
    from benchc.data import load_dataset
    from benchc.models.hf import HFBackend

    cfg = SimpleNamespace(
        model=str(model), from_store=None, executor="local", resolved_image_size=lambda: None
    )
    dataset = load_dataset(str(REPO / "fixtures" / "testbed"))
    return SimpleNamespace(cfg=cfg, dataset=dataset, backend=HFBackend(str(model), device="cpu"))


def test_an_impossible_processor_size_stops_naming_the_setting(tmp_path):
    state = _state(edited_copy(tmp_path, size={"height": 224, "width": 224}))
    with pytest.raises(LoadError) as err:
        probe(state)  # type: ignore[arg-type]
    text = str(err.value)
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    assert "cannot take its input: pre-flight query of sample" in lines[0]
    assert "ValueError: Input image size (224*224) doesn't match model (128*128)" in lines[0]
    assert lines[1] == (
        "  cause: the processor's image_processor.size is 224x224 px, the model's "
        'vision_config.image_size is 128 px: set size to {"height": 128, "width": 128} in the '
        "checkpoint's processor config (processor_config.json or preprocessor_config.json)"
    )
    assert "Traceback" not in text


def test_a_changed_but_working_preprocessing_passes_the_preflight(tmp_path):
    """The candidate under test: named in "changed since baseline" and gated, no usage error."""
    probe(_state(edited_copy(tmp_path, resample=0, image_mean=[0.5, 0.5, 0.5])))  # type: ignore[arg-type]


def test_size_mismatch_reads_height_width_edges_and_the_crop():
    def backend(size, crop=False, crop_size=None, model=128):
        ip = SimpleNamespace(size=size, do_center_crop=crop, crop_size=crop_size)
        vision = SimpleNamespace(image_size=model)
        return SimpleNamespace(
            processor=SimpleNamespace(image_processor=ip),
            model=SimpleNamespace(config=SimpleNamespace(vision_config=vision)),
        )

    assert size_mismatch(backend({"height": 128, "width": 128})) is None
    assert "size is 224x224 px" in str(size_mismatch(backend({"shortest_edge": 224})))
    # a center crop decides what the tower sees: a resize to 256 cropped to 128 is fine
    assert size_mismatch(backend(256, crop=True, crop_size={"height": 128, "width": 128})) is None
    crop = size_mismatch(backend(256, crop=True, crop_size={"height": 96, "width": 96}))
    assert crop is not None and "image_processor.crop_size is 96x96 px" in crop
    assert size_mismatch(SimpleNamespace()) is None  # a server: nothing to read


def test_a_long_error_is_cut_to_twenty_lines():
    exc = ValueError("first\n" + "\n".join(f"line {i}" for i in range(100)))
    text = message("m", "s1", exc, "the cause")
    lines = text.splitlines()
    assert len(lines) == MAX_LINES
    assert lines[1] == "  cause: the cause"
    assert lines[-1] == "  ... (83 more lines)"
