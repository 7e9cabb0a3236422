"""The committed tiny VLM (fixtures/tiny-vlm): loads offline, is small, answers with a bare letter
and genuinely uses its image (well above chance on clean held-out samples, near chance when the
images are shuffled across samples)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from benchc.data import synthetic
from benchc.tinyvlm.checkpoint import IM_END
from benchc.tinyvlm.report import checkpoint_bytes
from benchc.tinyvlm.train import EVAL_SEED, TRAIN_SEED_BASE, accuracy_by_kind, letter_probs

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "tiny-vlm"
N = 96  # 16 per kind; fixed seed, so the figures below are exact, not flaky


@pytest.fixture(scope="module")
def loaded():
    from transformers import AutoModelForImageTextToText, AutoProcessor

    torch.set_num_threads(1)
    # local_files_only: the checkpoint must load with no network (CI has none).
    processor = AutoProcessor.from_pretrained(FIXTURE, backend="pil", local_files_only=True)
    model = AutoModelForImageTextToText.from_pretrained(FIXTURE, local_files_only=True)
    model.eval()
    return processor, model


@pytest.fixture(scope="module")
def held_out():
    assert EVAL_SEED < TRAIN_SEED_BASE  # the evaluation stream is never trained on
    return synthetic.generate_arrays(N, EVAL_SEED + 1, 128)


def test_checkpoint_is_complete_small_and_has_no_training_heads(loaded) -> None:
    names = {p.name for p in FIXTURE.iterdir()}
    for needed in (
        "model.safetensors",
        "config.json",
        "tokenizer.json",
        "processor_config.json",
        "chat_template.jinja",
        "BUILD_REPORT.md",
    ):
        assert needed in names
    assert checkpoint_bytes(FIXTURE) <= 20_000_000
    _, model = loaded
    assert type(model).__name__ == "LlavaForConditionalGeneration"
    assert not any(k.startswith(("heads", "aux")) for k in model.state_dict())
    build = json.loads((FIXTURE / "tinyvlm_build.json").read_text())
    assert build["config"]["image_size"] == model.config.vision_config.image_size


def test_greedy_answer_is_a_bare_letter_then_im_end(loaded, held_out) -> None:
    from benchc.tinyvlm.train import _pils, prompt_text

    processor, model = loaded
    text = prompt_text(processor, held_out.questions[0], held_out.options[0])
    inputs = processor(images=_pils(held_out.images[:1]), text=[text], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    new = processor.tokenizer.convert_ids_to_tokens(out[0, inputs["input_ids"].shape[1] :])
    assert new[0] in ("A", "B", "C", "D")
    assert new[1] == IM_END


def test_clean_well_above_chance_and_shuffled_images_near_chance(loaded, held_out) -> None:
    processor, model = loaded
    q, o, y = held_out.questions, held_out.options, held_out.answer
    clean = letter_probs(model, processor, held_out.images, q, o)
    acc = accuracy_by_kind(clean, y, held_out.kind)
    assert acc["all"] >= 0.7, acc
    perm = np.random.default_rng(0).permutation(N)
    shuffled = accuracy_by_kind(
        letter_probs(model, processor, held_out.images[perm], q, o), y, held_out.kind
    )
    assert abs(shuffled["all"] - 0.25) <= 0.12, shuffled


@pytest.mark.slow  # the embedded model on three corruptions x 5 severities of the testbed (~10 s)
@pytest.mark.parametrize(
    ("corruption", "min_drop"),
    [("gaussian_blur", 0.02), ("gaussian_noise", 0.1), ("shot_noise", 0.1)],
)
def test_accuracy_falls_as_blur_and_noise_severity_rise(
    loaded, held_out, corruption, min_drop
) -> None:
    """Issue 4: the model must be hurt by blur *and* noise (the 32 px-patch v1 model was not hurt
    by noise at all): accuracy never rises from severity 1 to 3 to 5, and severity 5 sits at
    least ``min_drop`` below clean (measured on these 96 samples: blur -0.03, gaussian noise
    -0.15, shot noise -0.22; on 600 held-out samples see fixtures/tiny-vlm/BUILD_REPORT.md)."""
    from benchc.corruptions import corrupt_array

    processor, model = loaded
    q, o, y = held_out.questions, held_out.options, held_out.answer

    def accuracy(images) -> float:
        probs = letter_probs(model, processor, images, q, o)
        return accuracy_by_kind(probs, y, held_out.kind)["all"]

    acc = {0: accuracy(held_out.images)}
    for sev in (1, 3, 5):
        images = [
            corrupt_array(im, corruption, sev, seed=0, sample_id=i)
            for i, im in enumerate(held_out.images)
        ]
        acc[sev] = accuracy(np.stack(images))
    assert acc[1] >= acc[3] >= acc[5], acc
    assert acc[5] <= acc[0] - min_drop, acc
