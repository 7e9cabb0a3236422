"""The architecture matrix: every image-text VLM family transformers supports natively, as a tiny
random checkpoint in a folder, through the real ``--model=<folder>`` loading path.

Per family: letter logits equal a one-sample brute-force forward (the model's full logits, letter
variants found by scanning the whole vocabulary) within 1e-4; batch 1 vs batch 8 within 1e-3 with
the same argmax; the full next-token distribution (VSI) equals the brute-force one; the gap
probe's own-tower pooled features are image-dependent, batch-invariant and, for the families
whose tower takes the image processor's output directly (Qwen-VL, LLaVA, PaliGemma, Gemma 3,
InternVL, Mllama), equal the documented layer and tokens pooled by hand; and a 4-sample x
2-cell suite run records every gate. Marked ``architectures`` (own CI line, ``-m
architectures``); the check that the unsupported families are still unsupported runs by default.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

# pytester's in-process runs unload every module first imported inside them, and C extensions
# (torch above all) cannot be imported twice: load the stack an inner run touches out here.
import benchc.corruptions
import benchc.metrics.vsi
import benchc.models.hf
import benchc.suite.session  # noqa: F401
from benchc.models import load_backend
from benchc.models.base import Query
from benchc.models.hf import HFBackend
from benchc.spec import LETTERS
from benchc.testing.dev.tiny_families import FAMILIES, UNSUPPORTED, build, unsupported_reason
from benchc_tests.unit.suite_project import make_suite_project
from benchc_tests.unit.test_models_hf import synthetic_queries

pytest_plugins = ["pytester"]

NAMES = sorted(FAMILIES)
matrix = pytest.mark.architectures


@functools.cache
def _folder(name: str, root: str) -> Path:
    return build(name, Path(root) / name)


@functools.cache
def _backend(name: str, root: str) -> HFBackend:
    torch.set_num_threads(1)
    backend = load_backend(str(_folder(name, root)), batch_size=8)  # the --model=<folder> path
    assert isinstance(backend, HFBackend)
    return backend


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("families"))


@pytest.fixture(scope="module")
def queries() -> list[Query]:
    qs = synthetic_queries(8)
    # one short two-option query: rows of different lengths share the batch (left padding)
    return [*qs[:7], Query(qs[7].image, "Which?", ("yes", "no"), id="short")]


def _brute_force(backend: HFBackend, query: Query) -> torch.Tensor:
    """float64 (V,) next-token log-probs of one sample: the processor, the chat template and a
    plain full-logits forward, nothing of the backend's batching, keeping or casting."""
    prompt = backend.render(backend.user_text(query))
    bos = backend.tokenizer.bos_token
    inputs = backend.processor(
        images=[[Image.fromarray(query.image)]],
        text=[prompt],
        return_tensors="pt",
        add_special_tokens=not (bos and prompt.startswith(bos)),
    )
    inputs.pop("labels", None)
    with torch.inference_mode():
        logits = backend.model(**inputs, use_cache=False).logits[0, -1]
    return torch.log_softmax(logits.double(), dim=-1)


@functools.cache
def _vocab_letters(backend: HFBackend) -> dict[str, list[int]]:
    """Every token that decodes to ``L`` or ``" L"``, found by decoding the whole vocabulary."""
    out: dict[str, list[int]] = {c: [] for c in LETTERS}
    for tid in range(len(backend.tokenizer)):
        text = backend.tokenizer.decode([tid], clean_up_tokenization_spaces=False)
        if text.strip() in out and text in (text.strip(), " " + text.strip()):
            out[text.strip()].append(tid)
    return out


def _option_logits(logprobs: torch.Tensor, letters: dict[str, list[int]], k: int) -> np.ndarray:
    return np.array([float(torch.logsumexp(logprobs[letters[LETTERS[j]]], 0)) for j in range(k)])


@matrix
@pytest.mark.parametrize("name", NAMES)
def test_letter_logits_and_distribution_match_brute_force(name, root, queries) -> None:
    backend = _backend(name, root)
    letters = _vocab_letters(backend)
    assert all(letters[c] for c in LETTERS[:4]), f"{name}: a letter is not a single token"
    batch = backend.forward(queries, distribution=True)
    for i, q in enumerate(queries):
        k = len(q.options)
        single = backend.forward([q], distribution=True)
        reference = _brute_force(backend, q)
        expected = _option_logits(reference, letters, k)
        np.testing.assert_allclose(single.option_logits[0, :k], expected, atol=1e-4)
        # the VSI distribution: the model's full next-token log-distribution
        assert single.logprobs.shape == (1, reference.shape[0])
        np.testing.assert_allclose(single.logprobs[0], reference.numpy(), atol=1e-4)
        # batch of 8 (padded rows included) vs alone
        np.testing.assert_allclose(
            batch.option_logits[i, :k], single.option_logits[0, :k], atol=1e-3
        )
        assert np.argmax(batch.option_logits[i, :k]) == np.argmax(single.option_logits[0, :k])
        np.testing.assert_allclose(batch.logprobs[i], single.logprobs[0], atol=1e-3)
    # the answer position sees the image: black vs noise moves the letters' logits
    noise = np.random.default_rng(0).integers(0, 256, queries[0].image.shape, dtype=np.uint8)
    q = queries[0]
    pair = [Query(img, q.question, q.options) for img in (np.zeros_like(noise), noise)]
    out = backend.forward(pair)
    assert np.abs(out.option_logits[0] - out.option_logits[1]).max() > 1e-4


@matrix
@pytest.mark.parametrize("name", NAMES)
def test_own_tower_pooled_features(name, root, queries) -> None:
    backend = _backend(name, root)
    images = [q.image for q in queries[:4]]
    feats = backend.vision_features(images)
    tower_width = _tower_width(backend.model)
    assert feats.shape == (4, tower_width) and feats.dtype == np.float32
    assert np.isfinite(feats).all()
    assert np.abs(feats[0] - feats[1]).max() > 1e-4, "pooled features ignore the image"
    alone = backend.vision_features(images[:1])
    np.testing.assert_allclose(alone[0], feats[0], atol=1e-4)
    assert FAMILIES[name].pooled  # documented: which layer, which tokens
    reference = _reference_features(backend, name, images[0])
    if reference is not None:  # the documented layer and tokens, computed by hand
        np.testing.assert_allclose(feats[0], reference, atol=1e-5)
    # the VSI passes hand over their own tower run: the same features, bit for bit
    in_pass = backend.forward(queries[:4], features=True).features
    np.testing.assert_array_equal(in_pass, feats)


def _reference_features(backend: HFBackend, name: str, image: np.ndarray) -> np.ndarray | None:
    """The documented pool computed by hand from the tower's own outputs, for the families
    whose tower takes the image processor's output directly; None for the others."""
    from benchc.models.vision import find_vision_tower

    inputs = backend.processor.image_processor(
        images=[[Image.fromarray(image)]], return_tensors="pt"
    )
    tower = find_vision_tower(backend.model)
    with torch.inference_mode():
        if name.startswith("qwen"):
            out = tower(inputs["pixel_values"], grid_thw=inputs["image_grid_thw"])
            return out.last_hidden_state.float().mean(0).numpy()  # every patch, pre-merger
        if name in ("llava", "paligemma", "gemma3"):
            hidden = tower(inputs["pixel_values"]).last_hidden_state[0].float()
            if name == "llava":
                hidden = hidden[1:]  # CLIP's class token dropped
            return hidden.mean(0).numpy()
        if name == "internvl":  # one image: every crop (and thumbnail) is its own, CLS dropped
            hidden = tower(inputs["pixel_values"]).last_hidden_state[:, 1:].float()
            assert int(inputs["num_patches"][0]) == hidden.shape[0] > 1
            return hidden.reshape(-1, hidden.shape[-1]).mean(0).numpy()
        if name == "mllama":  # final layer = first D channels; real tiles only; class token out
            out = tower(
                pixel_values=inputs["pixel_values"],
                aspect_ratio_ids=inputs["aspect_ratio_ids"],
                aspect_ratio_mask=inputs["aspect_ratio_mask"],
            ).last_hidden_state[0, 0]
            real = inputs["aspect_ratio_mask"][0, 0].bool()
            tokens = out[real][:, 1:, : tower.config.hidden_size].float()
            return tokens.reshape(-1, tokens.shape[-1]).mean(0).numpy()
    return None


def _tower_width(model: torch.nn.Module) -> int:
    vision = model.config.vision_config
    return int(getattr(vision, "embed_dim", None) or vision.hidden_size)


@matrix
@pytest.mark.parametrize("name", NAMES)
def test_suite_run_records_every_gate(name, root, pytester, tmp_path_factory) -> None:
    """4 samples x 2 cells through ``pytest --model=<folder>``: cells, model-level and VSI gates
    are computed and recorded (the gap's probe and VSI included), with finite figures."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    _backend(name, root)  # the family's transformers modules load outside the inner run
    data = tmp_path_factory.mktemp("data") / "four"
    if not data.exists() or not any(data.iterdir()):
        save_jsonl(generate(4, 11), data)
    project = make_suite_project(pytester)
    out = project.path
    result = project.runpytest_inprocess(
        "suite",
        f"--model={_folder(name, root)}",
        f"--dataset={data}",
        "--corruptions=gaussian_noise,pixelate",
        "--severities=2",
        "--image-size=64",
        "--batch-size=4",
        f"--results-dir={out / 'results'}",
        f"--cache-dir={out / 'cache'}",
        f"--thresholds-dir={out / 'thresholds'}",
        "--snapshot-update",
        "-p",
        "no:randomly",
    )
    result.assert_outcomes(passed=2 + 2 + 15 + 2)  # cells, families, model level, VSI
    snapshots = {p.name: json.loads(p.read_text()) for p in (out / "thresholds").glob("*/*.json")}
    assert len(snapshots) == 2 + 2 + 15 + 2  # one per gated case, cells and families included
    vsi = snapshots["vsi-insensitive_fraction.json"]
    assert vsi["n"] == 4 and math.isfinite(vsi["info"]["median_vsi"])


# -- runs by default: the families that cannot work are still the ones the docs list -----------
@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_family_reason_still_holds(name) -> None:
    """Each listed family fails for the stated reason; when it stops failing (torchvision became
    installable, transformers gained a PIL processor), this test fails and the list must move."""
    reason, check = UNSUPPORTED[name]
    assert unsupported_reason(name) == reason
    with pytest.raises(Exception) as info:
        check()
    assert "torchvision" in str(info.value).lower(), (
        f"{name}: failed for another reason than docs/guides/models.md states: {info.value}"
    )


def test_readme_lists_every_family_with_its_status() -> None:
    readme = (Path(__file__).resolve().parents[2] / "docs" / "guides" / "models.md").read_text()
    for name in [*FAMILIES, *UNSUPPORTED]:
        assert f"`{name}`" in readme, f"docs/guides/models.md's architecture table misses {name}"
