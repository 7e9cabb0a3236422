"""The embedded tiny LLaVA checkpoint: its sizes, tokenizer, processor, chat template, random
weights and on-disk format.

Both the format-only build (:func:`benchc.tinyvlm.build.build_untrained`) and the trainer
(:mod:`benchc.tinyvlm.train`) start from :func:`make_components` and end with :func:`save`.
Everything goes through ``save_pretrained`` so the result reloads with the same
``AutoProcessor`` / ``AutoModelForImageTextToText`` calls the Hugging Face backend uses for any hub
model: CI exercises the real code path, not a mock.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import torch

from benchc.spec import ANSWER_INSTRUCTION, LETTERS, format_question

PAD, IM_START, IM_END, IMAGE = "<pad>", "<|im_start|>", "<|im_end|>", "<image>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END, IMAGE)

#: ChatML with string or list content; an image item renders ``<image>\n`` so the processor can
#: expand it to one token per patch. The generation prompt ends the assistant header with a newline,
#: so the first generated token is the bare letter.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for item in message['content'] -%}"
    "{%- if item['type'] == 'image' -%}{{- '<image>\\n' -}}"
    "{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


@dataclass(frozen=True)
class TinyVLMConfig:
    """Sizes of the tiny LLaVA. ``FULL`` is the committed model, ``MINIATURE`` the CI build test.

    Patch 16 at 128 px (8 x 8 tokens, 2 x 2 per synthetic grid cell): with 32 px patches each
    token averaged 1024 pixels, so pixel noise cancelled and accuracy stayed flat under every
    noise corruption (the v1 model, preset ``full-v1``).
    """

    image_size: int = 128
    patch_size: int = 16
    vision_hidden: int = 96
    vision_intermediate: int = 192
    vision_layers: int = 3
    vision_heads: int = 3
    text_hidden: int = 128
    text_intermediate: int = 256
    text_layers: int = 3
    text_heads: int = 4
    text_kv_heads: int = 2
    vocab_size: int = 512
    max_positions: int = 512
    #: Synthetic samples whose questions seed the tokenizer corpus.
    corpus_samples: int = 600

    @property
    def image_seq_length(self) -> int:
        return (self.image_size // self.patch_size) ** 2


FULL = TinyVLMConfig()
MINIATURE = replace(
    FULL,
    image_size=32,
    patch_size=16,
    vision_hidden=32,
    vision_intermediate=64,
    vision_layers=1,
    vision_heads=2,
    text_hidden=32,
    text_intermediate=64,
    text_layers=1,
    text_heads=2,
    text_kv_heads=1,
    vocab_size=320,
    corpus_samples=60,
)
#: "full-v1": the first committed model (32 px patches, 2 LM layers, no option-line heads).
PRESETS = {
    "full": FULL,
    "miniature": MINIATURE,
    "full-v1": replace(FULL, patch_size=32, text_layers=2),
}

#: Phrases outside the synthetic generator that prompts commonly contain (fallback is bytes anyway).
_EXTRA_CORPUS = (
    "What colour is the shape? What shape is shown in the image? How many shapes are there?",
    "Which option best describes the image? What is written in the image? Which bar is tallest?",
    "red green blue yellow orange purple black white grey gray pink brown cyan magenta",
    "circle square triangle star cross ring diamond hexagon rectangle ellipse line dot",
    "left right top bottom middle centre center above below upper lower largest smallest",
    "zero one two three four five six seven eight nine ten 0 1 2 3 4 5 6 7 8 9 10",
    "yes no true false none of the above all of the above",
)


def synthetic_questions(n: int, seed: int) -> list[tuple[str, tuple[str, ...]]]:
    """(question, options) pairs of the embedded synthetic families, when the generator exists."""
    try:
        from benchc.data import synthetic
    except ImportError:
        return []
    return [(s.question, tuple(s.options)) for s in synthetic.generate(n, seed)]


def corpus(config: TinyVLMConfig, seed: int = 0) -> Iterator[str]:
    """Tokenizer training text: the exact user turns the model will see, plus common phrasing."""
    yield ANSWER_INSTRUCTION
    for q, opts in synthetic_questions(config.corpus_samples, seed):
        yield format_question(q, opts)
    yield from _EXTRA_CORPUS
    for letter in LETTERS:
        yield f"{letter}. {letter} {letter}\n"
    for _ in range(8):
        yield "user\nassistant\nsystem\n"


def train_tokenizer(lines: Iterable[str], vocab_size: int):
    """Byte-level BPE: every string encodes (unknown words fall back to bytes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = list(lines)
    # Single letters and space-prefixed letters must be single tokens (docs/spec.md §2 variants).
    # Word counts decide merge order, so a heavy line makes every " X" merge come first.
    lines += ["".join(f" {c}" for c in LETTERS) * 1000]
    tok.train_from_iterator(lines, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=IM_END,
        bos_token=None,
        padding_side="left",
        extra_special_tokens={"image_token": IMAGE},
    )
    fast.add_special_tokens({"additional_special_tokens": [IM_START]})
    return fast


def letter_token_ids(tokenizer) -> list[list[int]]:
    """For each letter A..Z, the ids of its single-token variants ("A", " A")."""
    out = []
    for letter in LETTERS:
        ids = []
        for variant in (letter, f" {letter}"):
            enc = tokenizer.encode(variant, add_special_tokens=False)
            if len(enc) == 1:
                ids.append(enc[0])
        out.append(ids)
    return out


def make_model(config: TinyVLMConfig, tokenizer, seed: int):
    """A randomly initialised LLaVA (CLIP tower + Llama) with deterministic weights for ``seed``."""
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )

    vision = CLIPVisionConfig(
        hidden_size=config.vision_hidden,
        intermediate_size=config.vision_intermediate,
        num_hidden_layers=config.vision_layers,
        num_attention_heads=config.vision_heads,
        image_size=config.image_size,
        patch_size=config.patch_size,
        projection_dim=config.vision_hidden,
    )
    text = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=config.text_hidden,
        intermediate_size=config.text_intermediate,
        num_hidden_layers=config.text_layers,
        num_attention_heads=config.text_heads,
        num_key_value_heads=config.text_kv_heads,
        max_position_embeddings=config.max_positions,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    cfg = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tokenizer.convert_tokens_to_ids(IMAGE),
        image_seq_length=config.image_seq_length,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(cfg)
    model.eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.bos_token_id = None
    return model


def make_processor(config: TinyVLMConfig, tokenizer):
    """PIL-backend CLIP preprocessing (torchvision's differs by up to 1.6e-4 in logits) + LLaVA."""
    from transformers import CLIPImageProcessorPil, LlavaProcessor

    size = config.image_size
    # Squash to a square rather than centre-crop: a crop would cut question-relevant content
    # (chart bars, text at the border) out of non-square testbed images.
    image_processor = CLIPImageProcessorPil(
        size={"height": size, "width": size},
        do_center_crop=False,
        do_resize=True,
    )
    return LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=config.patch_size,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
        image_token=IMAGE,
    )


def make_components(config: TinyVLMConfig, seed: int = 0):
    """(processor, randomly initialised model) for ``config``; deterministic in ``seed``."""
    tokenizer = train_tokenizer(corpus(config, seed), config.vocab_size)
    for letter, ids in zip(LETTERS, letter_token_ids(tokenizer), strict=True):
        if not ids:
            raise RuntimeError(f"letter {letter!r} is not a single token")
    return make_processor(config, tokenizer), make_model(config, tokenizer, seed)


def save(out: Path, model, processor, config: TinyVLMConfig, extra: dict | None = None) -> None:
    """Save weights, processor and build config (replacing ``out``'s previous checkpoint files)."""
    if out.exists():
        for name in ("model.safetensors", "config.json", "generation_config.json"):
            (out / name).unlink(missing_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    # Batched calls leave padding state on the backend tokenizer; keep tokenizer.json canonical.
    backend = processor.tokenizer.backend_tokenizer
    backend.no_padding()
    backend.no_truncation()
    processor.save_pretrained(out)
    meta = {"config": asdict(config), **(extra or {})}
    (out / "tinyvlm_build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")


__all__ = [
    "CHAT_TEMPLATE",
    "FULL",
    "IMAGE",
    "IM_END",
    "IM_START",
    "MINIATURE",
    "PAD",
    "PRESETS",
    "SPECIAL_TOKENS",
    "TinyVLMConfig",
    "letter_token_ids",
    "make_components",
    "make_model",
    "make_processor",
    "save",
]
