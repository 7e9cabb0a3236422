"""Issue 50: what a loaded backend records of itself (:mod:`benchc.models.identity`).

The settings the backend actually used (preprocessing, prompt, special tokens, generation) are
recorded beside the files, so a change made outside the checkpoint's files (``--image-size``, a
template the processor does not carry) is still named; a served backend records its request
settings and what its API reported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from benchc.gates.changes import compare
from benchc.models.identity import checkpoint_identity, server_settings

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "fixtures" / "tiny-vlm"


@pytest.fixture(scope="module")
def backend():
    from benchc.models.hf import HFBackend

    return HFBackend(str(FIXTURE), device="cpu", batch_size=2)


def test_the_settings_a_backend_used_are_recorded(backend):
    ident = checkpoint_identity(backend, "fixtures/tiny-vlm")
    assert ident["model"] == "fixtures/tiny-vlm" and ident["revision"] is None
    assert set(ident["files"]) >= {"model.safetensors", "processor_config.json"}
    assert ident["configs"]["config.json"]["vision_config"]["image_size"] == 128
    settings = ident["settings"]
    image = settings["image processor"]
    assert image["size"] == {"height": 128, "width": 128}
    assert image["resample"] == "bicubic"
    assert image["image_mean"] == pytest.approx([0.48145466, 0.4578275, 0.40821073])
    assert image["do_rescale"] is True and image["do_center_crop"] is False
    assert settings["special tokens"]["pad_token"] == "<pad>"
    assert settings["prompt (example)"].startswith("<|im_start|>user\n<image>\n")
    assert settings["generation"]["eos_token_id"] == 2
    assert "transformers_version" not in settings["generation"]


def test_a_setting_outside_the_files_is_named(backend):
    before = checkpoint_identity(backend, "m")
    backend.image_size, was = 96, backend.image_size
    try:
        after = checkpoint_identity(backend, "m")
    finally:
        backend.image_size = was
    assert [c.line() for c in compare(before, after)] == ["settings: --image-size absent -> 96"]


def test_a_system_prompt_in_the_template_names_the_file_and_the_prompt(tmp_path, backend):
    from benchc.models.hf import HFBackend

    copy = tmp_path / "sys"
    shutil.copytree(FIXTURE, copy)
    path = copy / "chat_template.jinja"
    system = "{{- '<|im_start|>system\\nBe careful.<|im_end|>\\n' -}}"
    path.write_text(system + path.read_text())
    edited = HFBackend(str(copy), device="cpu", batch_size=2)
    lines = [
        c.line()
        for c in compare(
            checkpoint_identity(backend, "a"), checkpoint_identity(edited, "b"),
            old_root=FIXTURE, new_root=copy,
        )
    ]  # fmt: skip
    assert lines[0].startswith("chat_template.jinja: changed at character ")
    assert "Be careful." in lines[0]
    assert lines[1] == (
        "settings: prompt (example): changed at character 12: '<|im_start|>' -> "
        "'<|im_start|>system\\nBe careful.<|im_end|>\\n<|im_start|>'"
    )
    assert len(lines) == 2, lines


def test_a_server_records_its_request_settings_and_what_it_reported():
    class Served:
        model, base_url, temperature, max_tokens = "org/m", "http://h:1/v1", 0.7, 16

        def __init__(self) -> None:
            self.served = {"model": "org/m-2026-12", "system_fingerprint": "fp_1"}

    settings = server_settings(Served())
    assert settings["model"] == "org/m" and settings["temperature"] == 0.7
    assert settings["server reported"] == {"model": "org/m-2026-12", "system_fingerprint": "fp_1"}
