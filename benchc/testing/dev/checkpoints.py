"""Real weight edits of a checkpoint, saved as checkpoint folders: the release regressions (and
benign re-releases) a gate must tell apart (``benchmarks/checkpoint_zoo.py``).

Unlike :mod:`benchc.testing.dev.zoo`'s output mutants, every edit here changes the weights
of a transformers image-text-to-text checkpoint and writes a new folder that loads with
``from_pretrained`` like any release: the model, its processor and tokenizer files copied, its
``model.safetensors`` replaced. Each edit takes a ``strength`` on a ladder; all are seeded, so
the same source, edit, strength and seed give the same bytes.

Edits (:data:`EDITS`): the vision-to-language projector scaled down; the vision tower's
weights perturbed; vision layers re-initialised; the language model fine-tuned briefly on text
only; the vision tower fake-quantised to int8 / int4 (symmetric, per output channel); a random
low-rank update merged into the language model; a brief fine-tune on fixed-order data (the
answer always option A: a position-biased checkpoint). Benign re-releases: the checkpoint
re-saved in bfloat16 (and loaded back in float32); other settings (attention implementation,
batch size) are model arguments of the same folder, not edits.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: Attribute paths of the vision-to-language projector in transformers VLM families.
PROJECTORS: tuple[str, ...] = (
    "model.multi_modal_projector",  # LLaVA, LLaVA-NeXT/OneVision, Gemma 3, Mistral3, InternVL
    "multi_modal_projector",
    "model.connector",  # Idefics3 / SmolVLM
    "model.visual.merger",  # Qwen2/2.5/3-VL
)
#: Attribute paths of the vision tower in transformers VLM families (LLaVA-style first).
TOWERS: tuple[str, ...] = (
    "model.vision_tower",
    "vision_tower",
    "model.visual",
    "model.vision_model",
)


def _find(model: Any, paths: tuple[str, ...], what: str) -> Any:
    for path in paths:
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if obj is not None:
            return obj
    raise ValueError(f"{type(model).__name__}: no {what} at any of {paths}")


def tower(model: Any) -> Any:
    return _find(model, TOWERS, "vision tower")


def projector(model: Any) -> Any:
    return _find(model, PROJECTORS, "projector")


def language_model(model: Any) -> Any:
    return _find(model, ("model.language_model", "language_model"), "language model")


def _linears(module: Any) -> Iterator[Any]:
    import torch

    for m in module.modules():
        if isinstance(m, torch.nn.Linear):
            yield m


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(seed)


# -- the edits: (model, strength, seed) -> None, in place -----------------------------------------
def scale_projector(model: Any, strength: float, seed: int = 0) -> None:
    """The projector's last linear layer (weight and bias) times ``1 - strength``: the image
    tokens the language model reads fade by that share."""
    import torch

    last = list(_linears(projector(model)))[-1]
    with torch.no_grad():
        last.weight.mul_(1.0 - strength)
        if last.bias is not None:
            last.bias.mul_(1.0 - strength)


def perturb_tower(model: Any, strength: float, seed: int = 0) -> None:
    """Gaussian noise of ``strength`` x each tensor's own SD on every vision-tower weight."""
    import torch

    gen = _generator(seed)
    with torch.no_grad():
        for p in tower(model).parameters():
            if p.is_floating_point() and p.numel() > 1:
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
                p.add_((noise * p.float().std() * strength).to(p.dtype))


def _tower_layers(model: Any) -> Any:
    paths = ("encoder.layers", "vision_model.encoder.layers", "blocks", "encoder.layer")
    return _find(tower(model), paths, "encoder layers")


def reinit_tower_layers(model: Any, strength: float, seed: int = 0) -> None:
    """The last ``round(strength)`` vision-encoder layers re-initialised: every linear weight
    drawn N(0, 0.02) and its bias zeroed (a layer a bad merge or a broken load left at init)."""
    import torch

    layers = list(_tower_layers(model))
    k = round(strength)
    if not 1 <= k <= len(layers):
        raise ValueError(f"reinit_tower_layers: strength must be 1..{len(layers)}, got {strength}")
    gen = _generator(seed)
    with torch.no_grad():
        for layer in layers[-k:]:
            for lin in _linears(layer):
                lin.weight.copy_(torch.randn(lin.weight.shape, generator=gen) * 0.02)
                if lin.bias is not None:
                    lin.bias.zero_()


def quantize_tower(model: Any, strength: float, seed: int = 0) -> None:
    """Every vision-tower linear weight fake-quantised to ``int(strength)`` bits: symmetric,
    one scale per output channel, rounded to the integer grid and dequantised (what int8 / int4
    weight-only quantisation does to the numbers)."""
    import torch

    bits = int(strength)
    if not 2 <= bits <= 16:
        raise ValueError(f"quantize_tower: bits must be 2..16, got {strength}")
    qmax = 2 ** (bits - 1) - 1
    with torch.no_grad():
        for lin in _linears(tower(model)):
            w = lin.weight
            scale = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / qmax
            w.copy_((w / scale).round().clamp(-qmax - 1, qmax) * scale)


def merge_low_rank(model: Any, strength: float, seed: int = 0, rank: int = 4) -> None:
    """A random rank-``rank`` update ``U V^T`` merged into every language-model linear layer,
    scaled to ``strength`` x the weight's Frobenius norm (a LoRA merged from a bad run)."""
    import torch

    gen = _generator(seed)
    with torch.no_grad():
        for lin in _linears(language_model(model)):
            out_f, in_f = lin.weight.shape
            u = torch.randn(out_f, rank, generator=gen)
            v = torch.randn(in_f, rank, generator=gen)
            delta = u @ v.T
            delta *= strength * lin.weight.norm() / delta.norm()
            lin.weight.add_(delta.to(lin.weight.dtype))


def text_finetune(
    model: Any,
    strength: float,
    seed: int = 0,
    *,
    source: Path | None = None,
    answer_first: bool = False,
) -> None:
    """The language model fine-tuned for ``int(strength)`` AdamW steps (lr 1e-3, batch 16) on
    text only: the embedded generator's questions (another seed than the testbed's), options
    and answer letters in the checkpoint's chat template, without their images; next-token loss
    on the whole conversation. The vision tower and projector are frozen. ``answer_first``:
    fixed-order data, the options rotated so that the answer is always option A (a model that
    learns "answer A" from it prefers a position over the content)."""
    import torch
    from transformers import AutoTokenizer

    from benchc.data.rotations import rotate
    from benchc.data.synthetic import generate_items
    from benchc.spec import ANSWER_INSTRUCTION

    if source is None:
        raise ValueError("text_finetune needs the checkpoint folder (its tokenizer)")
    steps = int(strength)
    tok = AutoTokenizer.from_pretrained(source)
    items = generate_items(16 * max(steps, 1), seed=7_000 + seed)
    texts = []
    for it in items:
        options, answer = tuple(it.options), it.answer
        if answer_first:
            options, answer = rotate(options, answer), 0
        opts = "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(options))
        messages = [
            {"role": "user", "content": f"{it.question}\n{opts}\n{ANSWER_INSTRUCTION}"},
            {"role": "assistant", "content": chr(65 + answer)},
        ]
        texts.append(tok.apply_chat_template(messages, tokenize=False))
    lm = language_model(model)
    head = getattr(model, "lm_head", None)
    params = list(lm.parameters()) + (list(head.parameters()) if head is not None else [])
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(params, lr=1e-3)
    model.train()
    for step in range(steps):
        batch = tok(texts[16 * step : 16 * (step + 1)], return_tensors="pt", padding=True)
        labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
        out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                    labels=labels)  # fmt: skip
        opt.zero_grad()
        out.loss.backward()
        opt.step()
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)


@dataclass(frozen=True)
class Edit:
    """One weight edit: its name, what it does, the strengths of its ladder, and whether a
    gate should catch it (``benign`` False) or stay PASS (True)."""

    name: str
    fn: Callable[..., None]
    strengths: tuple[float, ...]
    benign: bool = False
    #: The edit needs the source folder (a tokenizer).
    needs_source: bool = False


def _bf16_resave(model: Any, strength: float, seed: int = 0) -> None:
    """Benign: weights rounded to bfloat16 and back (what re-saving a release in bf16 does;
    the folder stores the rounded values in float32 so it loads as any other)."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point():
                p.copy_(p.to(torch.bfloat16).to(p.dtype))


def fixed_order_finetune(model: Any, strength: float, seed: int = 0, *, source: Path) -> None:
    """Position-biased: :func:`text_finetune` on fixed-order data, the answer always option A
    (a checkpoint that learned "answer A when unsure")."""
    text_finetune(model, strength, seed, source=source, answer_first=True)


EDITS: tuple[Edit, ...] = (
    Edit("projector scaled down", scale_projector, (0.2, 0.4, 0.6)),
    Edit("vision tower perturbed", perturb_tower, (0.1, 0.2, 0.4)),
    Edit("vision layers re-initialised", reinit_tower_layers, (1, 2)),
    Edit("text-only fine-tune (steps)", text_finetune, (2, 5, 10), needs_source=True),
    Edit("vision tower quantised (bits)", quantize_tower, (8, 4, 3)),
    Edit("low-rank update merged", merge_low_rank, (0.05, 0.1, 0.2)),
    Edit("fixed-order fine-tune (steps)", fixed_order_finetune, (5, 10, 25), needs_source=True),
    Edit("re-saved in bfloat16", _bf16_resave, (1,), benign=True),
)
#: The position-biased edits among them (docs/spec.md §4, option order), on their ladder.
ORDER_EDITS: tuple[Edit, ...] = tuple(e for e in EDITS if e.fn is fixed_order_finetune)


def edit(name: str) -> Edit:
    for e in EDITS:
        if e.name == name:
            return e
    known = [e.name for e in EDITS]
    raise KeyError(f"no edit {name!r}; known: {known}")


def write_checkpoint(source: Path, out: Path, the_edit: Edit, strength: float, seed: int = 0):
    """``source`` with ``the_edit`` at ``strength`` applied, as a checkpoint folder ``out``
    (written once: an existing folder with the same recipe is reused). Returns ``out``."""
    import torch
    from transformers import AutoModelForImageTextToText

    recipe = {"source": str(source), "edit": the_edit.name, "strength": strength, "seed": seed}
    stamp = out / "benchc_edit.json"
    if stamp.is_file() and json.loads(stamp.read_text()) == recipe:
        return out
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(source, out, ignore=shutil.ignore_patterns("*.safetensors", "BUILD_*"))
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.manual_seed(seed)
    model = AutoModelForImageTextToText.from_pretrained(source, dtype=torch.float32)
    model.eval()
    kw = {"source": Path(source)} if the_edit.needs_source else {}
    the_edit.fn(model, strength, seed, **kw)
    model.save_pretrained(out)
    stamp.write_text(json.dumps(recipe, sort_keys=True) + "\n")
    return out


def weight_change(source: Path, out: Path) -> float:
    """Relative Frobenius norm of the weights' change (all tensors together)."""
    from safetensors.numpy import load_file

    a, b = (
        load_file(str(Path(source) / "model.safetensors")),
        load_file(str(out / "model.safetensors")),
    )
    num = sum(float(np.sum((b[k].astype(np.float64) - a[k]) ** 2)) for k in a)
    den = sum(float(np.sum(a[k].astype(np.float64) ** 2)) for k in a)
    return float(np.sqrt(num / den))


__all__ = ["EDITS", "ORDER_EDITS", "Edit", "edit", "weight_change", "write_checkpoint"]
