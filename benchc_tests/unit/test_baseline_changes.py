"""Issue 50: what changed since the baseline, named key by key (:mod:`benchc.gates.changes`).

Configuration-only copies of the embedded model (normalisation, rescale, resample, template,
tokenizer, config keys) each name every changed key; a copy with re-formatted JSON and equal
values names nothing; a weight edit names the module it touched; a baseline without an identity
says so. File level only here (no model is loaded): ``test_checkpoint_identity`` covers the
settings a loaded backend reports.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from benchc.gates.baselines import read_manifest
from benchc.gates.changes import (
    NOT_RECORDED,
    Change,
    baseline_changes,
    compare,
    look_first,
    offline_changes,
    summary_lines,
    text_change,
)
from benchc.models.identity import config_contents, file_digests

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "tiny-vlm"


def _files(folder: Path) -> dict:
    return {"model": str(folder), "files": file_digests(folder), "configs": config_contents(folder)}


@pytest.fixture(scope="module")
def baseline() -> dict:
    return _files(FIXTURE)


def _edit_json(name: str, edit: Callable[[dict], None]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / name
        data = json.loads(path.read_text())
        edit(data)
        path.write_text(json.dumps(data, indent=2))

    return apply


def _ip(**kv) -> Callable[[Path], None]:
    return _edit_json("processor_config.json", lambda d: d["image_processor"].update(kv))


def _template(old: str, new: str) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        path = folder / "chat_template.jinja"
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))

    return apply


def _added_token(data: dict) -> None:
    data["added_tokens"].append(dict(data["added_tokens"][-1], id=4, content="<extra>"))


#: edit -> the lines (substrings) its changes must include
EDITS: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "normalisation 0.5/0.5": (
        _ip(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5]),
        [
            "processor_config.json: image_processor.image_mean [0.4815, 0.4578, 0.4082] -> "
            "[0.5, 0.5, 0.5]",
            "processor_config.json: image_processor.image_std [0.2686, 0.2613, 0.2758] -> "
            "[0.5, 0.5, 0.5]",
        ],
    ),
    "rescale twice": (
        _ip(rescale_factor=1 / 255**2),
        ["processor_config.json: image_processor.rescale_factor 0.003922 -> 1.538e-05"],
    ),
    "no normalisation": (
        _ip(do_normalize=False),
        ["processor_config.json: image_processor.do_normalize True -> False"],
    ),
    "resample nearest": (
        _ip(resample=0),
        ["processor_config.json: image_processor.resample 3 -> 0"],
    ),
    "processor size 224": (
        _ip(size={"height": 224, "width": 224}),
        [
            "processor_config.json: image_processor.size.height 128 -> 224",
            "processor_config.json: image_processor.size.width 128 -> 224",
        ],
    ),
    "Answer: prefix": (
        _template("'<|im_start|>assistant\\n'", "'<|im_start|>assistant\\nAnswer: '"),
        ["chat_template.jinja: changed at character", "Answer: "],
    ),
    "right padding": (
        _edit_json("tokenizer_config.json", lambda d: d.update(padding_side="right")),
        ["tokenizer_config.json: padding_side 'left' -> 'right'"],
    ),
    "pad token": (
        _edit_json("tokenizer_config.json", lambda d: d.update(pad_token="<|im_end|>")),
        ["tokenizer_config.json: pad_token '<pad>' -> '<|im_end|>'"],
    ),
    "added token": (
        _edit_json("tokenizer.json", _added_token),
        ["tokenizer.json: added_tokens[4].content absent -> '<extra>'"],
    ),
    "vision feature layer -2": (
        _edit_json("config.json", lambda d: d.update(vision_feature_layer=-2)),
        ["config.json: vision_feature_layer -1 -> -2"],
    ),
    "generation setting": (
        _edit_json("generation_config.json", lambda d: d.update(temperature=0.7)),
        ["generation_config.json: temperature absent -> 0.7"],
    ),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_every_changed_key_of_a_configuration_only_copy_is_named(tmp_path, baseline, name):
    edit, expected = EDITS[name]
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    edit(copy)
    lines = [c.line() for c in compare(baseline, _files(copy), old_root=FIXTURE, new_root=copy)]
    for want in expected:
        assert any(want in line for line in lines), (want, lines)
    # only what was edited: every line is about the edited file
    edited = {line.split(":", 1)[0] for line in lines}
    assert len(edited) == 1, lines


def test_reformatted_json_with_equal_values_is_no_change(tmp_path, baseline):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    for path in copy.glob("*.json"):
        data = json.loads(path.read_text())
        path.write_text(json.dumps(data, indent=4, sort_keys=True) + "\n\n")
    # the bytes differ, the values do not
    assert file_digests(copy)["config.json"] != baseline["files"]["config.json"]
    assert compare(baseline, _files(copy), old_root=FIXTURE, new_root=copy) == []


def test_an_identical_copy_is_no_change(tmp_path, baseline):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    assert compare(baseline, _files(copy), old_root=FIXTURE, new_root=copy) == []


def _edit_weight(folder: Path, prefix: str, scale: float) -> str:
    from safetensors.numpy import load_file, save_file

    path = folder / "model.safetensors"
    tensors = load_file(str(path))
    name = next(n for n in sorted(tensors) if n.startswith(prefix) and tensors[n].ndim == 2)
    tensors[name] = (tensors[name] * scale).astype(tensors[name].dtype)
    save_file(tensors, str(path), metadata={"format": "pt"})
    return name


def test_a_weight_edit_names_the_module_with_its_relative_change(tmp_path, baseline):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    _edit_weight(copy, "vision_tower.encoder", 1.5)
    (change,) = compare(baseline, _files(copy), old_root=FIXTURE, new_root=copy)
    assert change.kind == "weights" and change.where == "model.safetensors"
    # one tensor of the vision tower scaled: the tower moved, the language model did not
    detail = change.detail or ""
    assert detail.startswith("changed; relative change by module: vision_tower ")
    moved = float(detail.split("vision_tower ")[1].split(",")[0])
    assert 0 < moved < 0.5
    for untouched in ("language_model 0", "multi_modal_projector 0"):
        assert untouched in detail, detail


def test_weights_without_the_baselines_folder_are_changed_by_digest(tmp_path, baseline):
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    _edit_weight(copy, "language_model.model", 1.1)
    (change,) = compare(baseline, _files(copy), old_root=None, new_root=copy)
    assert change.line() == "model.safetensors: changed (digest)"


def test_a_baseline_without_identity_says_so_and_how_to_get_one():
    doc = baseline_changes({"model": "x"}, {"files": {}}, candidate_root=None)
    assert doc == {"recorded": False, "changes": [], "note": NOT_RECORDED}
    assert summary_lines(doc) == [
        "changed since baseline: unknown: the baseline recorded no checkpoint identity "
        "(re-record to get one)"
    ]


def test_summary_and_look_first_name_the_changes():
    changes = [Change("config", "a.json", f"k{i}", i, i + 1).to_json() for i in range(5)]
    doc = {"recorded": True, "changes": changes, "note": None}
    assert summary_lines(doc)[0] == "changed since baseline (5):"
    assert summary_lines(doc)[1] == "  a.json: k0 0 -> 1"
    first = look_first(doc)
    assert first is not None and first.startswith("look first: changed since baseline: a.json: k0")
    assert first.endswith("(and 2 more in the summary)")
    nothing = {"recorded": True, "changes": [], "note": None}
    assert look_first(nothing) is None
    assert summary_lines(nothing) == [
        "changed since baseline: nothing (files, configs and settings as recorded)"
    ]


def test_a_setting_already_named_by_its_config_is_not_repeated():
    old = {"files": {}, "configs": {"p.json": {"image_mean": [0.1]}},
           "settings": {"image processor": {"image_mean": [0.1]}, "dtype": "float32"}}  # fmt: skip
    new = {"files": {}, "configs": {"p.json": {"image_mean": [0.5]}},
           "settings": {"image processor": {"image_mean": [0.5]}, "dtype": "bfloat16"}}  # fmt: skip
    lines = [c.line() for c in compare(old, new)]
    assert lines == ["p.json: image_mean [0.1] -> [0.5]", "settings: dtype 'float32' -> 'bfloat16'"]


def test_text_change_shows_the_differing_span():
    assert (
        text_change("abc<end>", "abc SYSTEM<end>")
        == "changed at character 3: 'abc' -> 'abc SYSTEM'"
    )


def test_the_committed_baseline_identity_is_the_embedded_models():
    """thresholds/tiny-vlm records fixtures/tiny-vlm's identity: a file of the fixture edited
    without updating the manifest is named here, before any gate run prints it."""
    manifest = read_manifest(REPO / "thresholds" / "tiny-vlm")
    recorded = manifest["identity"]
    assert recorded["model"] == "fixtures/tiny-vlm"
    doc = offline_changes(manifest, str(FIXTURE))
    assert doc is not None and doc["changes"] == [], doc


def test_offline_changes_of_an_edited_copy(tmp_path):
    manifest = read_manifest(REPO / "thresholds" / "tiny-vlm")
    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    _ip(do_rescale=False)(copy)
    doc = offline_changes(manifest, str(copy))
    assert doc is not None
    assert [c["line"] for c in doc["changes"]] == [
        "processor_config.json: image_processor.do_rescale True -> False"
    ]
    assert offline_changes({"model": "m"}, str(copy)) == {
        "recorded": False, "changes": [], "note": NOT_RECORDED
    }  # fmt: skip


def test_a_side_without_files_is_compared_by_fingerprint_not_as_removed_files(baseline):
    """A run computed elsewhere (no checkpoint folder read here) lists no file as removed."""
    elsewhere = {"name": "m", "fingerprint": "hf:other"}
    lines = [c.line() for c in compare({**baseline, "fingerprint": "hf:m"}, elsewhere)]
    assert lines == ["fingerprint 'hf:m' -> 'hf:other'"]


def test_a_report_written_later_reads_the_baselines_identity(tmp_path):
    """``benchc report``: the stored run's model folder against the recorded identity (the
    manifest's identity is kept out of report.json's provenance, not out of this)."""
    from types import SimpleNamespace

    from benchc.report.write import _baseline_manifest, _offline_changes

    copy = tmp_path / "copy"
    shutil.copytree(FIXTURE, copy)
    _ip(resample=0)(copy)
    folder = REPO / "thresholds" / "tiny-vlm"
    doc = _offline_changes(folder, SimpleNamespace(manifest={"model_spec": str(copy)}))
    assert doc is not None and doc["recorded"] is True
    assert [c["line"] for c in doc["changes"]] == [
        "processor_config.json: image_processor.resample 3 -> 0"
    ]
    assert "identity" not in (_baseline_manifest(folder) or {})
