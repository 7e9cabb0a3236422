"""Tiny random-weight checkpoints of the VLM families transformers supports natively.

No weights can be downloaded in CI, but every family can be instantiated from its config class
with tiny random weights (text hidden 64, 2 layers; vision hidden 32; 32-64 px images), which
is how transformers tests itself. Each builder writes a complete, offline-loadable folder:
weights, config, an image-only processor (image processor + tokenizer + chat template; benchc
never feeds video, and every video processor needs torchvision) and a byte-level BPE tokenizer
carrying the family's special tokens. The folder then goes through the real ``--model=<folder>``
path (``HFBackend``), exactly as a hub checkpoint would.

``FAMILIES`` maps a family name to its builder and documents which vision-tower layer and tokens
the gap probe pools (docs/spec.md §5); ``UNSUPPORTED`` names the families that cannot run
here, and why.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchc.models.processors import image_only
from benchc.spec import LETTERS, format_question

#: Tiny text model shared by all families (hidden 64, 2 layers, 4 heads of 16, 2 KV heads).
TEXT = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "max_position_embeddings": 1024,
}


def _corpus() -> list[str]:
    """Tokenizer training text: benchc's own prompts and the chat-role words."""
    lines = [
        format_question("What colour is the shape?", ("red", "blue", "green", "yellow")),
        format_question("How many objects are there?", ("one", "two", "three")),
        "user assistant system model Answer with the option's letter from the given choices",
    ]
    # " A" ... " Z" must be single tokens (docs/spec.md §2 letter variants): a heavy line merges
    # them first.
    lines.append("".join(f" {c}" for c in LETTERS) * 200)
    lines.append("".join(LETTERS) * 50)
    return lines


def make_tokenizer(
    specials: list[str],
    *,
    eos: str,
    pad: str,
    bos: str | None = None,
    prepend_bos: bool = False,
    attrs: dict[str, str] | None = None,
    vocab_size: int = 320,
) -> Any:
    """A byte-level BPE tokenizer with ``specials`` as special tokens.

    ``attrs`` become ``extra_special_tokens`` (processors read e.g. ``tokenizer.image_token``);
    ``prepend_bos`` adds a ``<bos> $A`` post-processor (Llama / Mistral / Gemma style).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    names = list(dict.fromkeys([*(t for t in (bos, eos, pad) if t), *specials]))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size + len(names),
        special_tokens=names,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(), trainer=trainer)
    if prepend_bos:
        if bos is None:
            raise ValueError("prepend_bos needs a bos token")
        tok.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A $B", special_tokens=[(bos, tok.token_to_id(bos))]
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=bos,
        eos_token=eos,
        pad_token=pad,
        padding_side="left",
        extra_special_tokens=attrs or {},
    )


def chat_template(
    *,
    turn: str,
    end: str,
    image: str,
    assistant: str = "assistant",
    prefix: str = "",
    user: str = "user",
) -> str:
    """A minimal Jinja chat template: ``prefix`` then, per message, ``turn.format(role)``, the
    image placeholder ``image`` and texts, ``end``; the generation prompt opens the
    ``assistant`` turn. Roles named ``user`` map to ``user``."""
    head = "{{- '" + prefix + "' -}}" if prefix else ""
    return (
        head
        + "{%- for message in messages -%}"
        + "{%- set role = '"
        + user
        + "' if message['role'] == 'user' else ('"
        + assistant
        + "' if message['role'] == 'assistant' else message['role']) -%}"
        + "{{- '"
        + turn.replace("{role}", "' + role + '")
        + "' -}}"
        + "{%- if message['content'] is string -%}{{- message['content'] -}}{%- else -%}"
        + "{%- for item in message['content'] -%}"
        + "{%- if item['type'] == 'image' -%}{{- '"
        + image
        + "' -}}{%- elif item['type'] == 'text' -%}{{- item['text'] -}}{%- endif -%}"
        + "{%- endfor -%}{%- endif -%}"
        + "{{- '"
        + end
        + "' -}}{%- endfor -%}"
        + "{%- if add_generation_prompt -%}{{- '"
        + turn.replace("{role}", assistant)
        + "' -}}{%- endif -%}"
    )


def _save(out: Path, model: Any, processor: Any) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    processor.save_pretrained(out)
    return out


def _seeded(cls: type, config: Any, seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    model = cls(config)
    # Some families zero-initialise a projection (Gemma 3's mm_input_projection_weight) or a
    # tanh gate (Mllama's cross-attention gates): with them the image never reaches the LM.
    # Random weights and open gates, so every path carries signal.
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.any():
                continue
            if "gate" in name.rsplit(".", 1)[-1]:
                param.fill_(1.0)
            elif param.dim() >= 2:
                param.normal_(0.0, 0.02)
    return model.eval()


# -- Qwen2-VL, Qwen2.5-VL, Qwen3-VL -----------------------------------------------------------
_QWEN_SPECIALS = [
    "<|im_start|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
_QWEN_TEMPLATE = chat_template(
    turn="<|im_start|>{role}\\n",
    end="<|im_end|>\\n",
    image="<|vision_start|><|image_pad|><|vision_end|>",
)


def _qwen_processor(patch: int, cls: type | None = None) -> Any:
    from transformers import (
        Qwen2VLImageProcessorPil,
        Qwen2VLProcessor,
    )

    tokenizer = make_tokenizer(
        _QWEN_SPECIALS,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        attrs={"image_token": "<|image_pad|>", "video_token": "<|video_pad|>"},
    )
    factor = patch * 2
    image_processor = Qwen2VLImageProcessorPil(
        size={"shortest_edge": factor * factor, "longest_edge": (2 * factor) ** 2},
        patch_size=patch,
        temporal_patch_size=2,
        merge_size=2,
    )
    return image_only(cls or Qwen2VLProcessor)(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=_QWEN_TEMPLATE
    )


def _qwen_ids(tokenizer: Any) -> dict[str, int]:
    ids = tokenizer.convert_tokens_to_ids
    return {
        "image_token_id": ids("<|image_pad|>"),
        "video_token_id": ids("<|video_pad|>"),
        "vision_start_token_id": ids("<|vision_start|>"),
        "vision_end_token_id": ids("<|vision_end|>"),
    }


def _qwen_text(tokenizer: Any) -> dict[str, Any]:
    return {
        **TEXT,
        "vocab_size": len(tokenizer),
        "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]},
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": None,
    }


def build_qwen2_vl(out: Path, seed: int = 0) -> Path:
    from transformers import Qwen2VLConfig, Qwen2VLForConditionalGeneration

    processor = _qwen_processor(14)
    tok = processor.tokenizer
    config = Qwen2VLConfig(
        text_config=_qwen_text(tok),
        vision_config={
            "depth": 1,
            "embed_dim": 32,
            "hidden_size": TEXT["hidden_size"],
            "num_heads": 2,
            "mlp_ratio": 2,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        **_qwen_ids(tok),
    )
    return _save(out, _seeded(Qwen2VLForConditionalGeneration, config, seed), processor)


def build_qwen2_5_vl(out: Path, seed: int = 0) -> Path:
    from transformers import (
        Qwen2_5_VLConfig,
        Qwen2_5_VLForConditionalGeneration,
        Qwen2_5_VLProcessor,
    )

    processor = _qwen_processor(14, Qwen2_5_VLProcessor)
    tok = processor.tokenizer
    config = Qwen2_5_VLConfig(
        text_config=_qwen_text(tok),
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": TEXT["hidden_size"],
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 56,
            "fullatt_block_indexes": [1],
        },
        **_qwen_ids(tok),
    )
    return _save(out, _seeded(Qwen2_5_VLForConditionalGeneration, config, seed), processor)


def build_qwen3_vl(out: Path, seed: int = 0) -> Path:
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration, Qwen3VLProcessor

    processor = _qwen_processor(16, Qwen3VLProcessor)
    tok = processor.tokenizer
    text = _qwen_text(tok)
    text["rope_parameters"] = {
        "rope_type": "default",
        "mrope_section": [2, 3, 3],
        "mrope_interleaved": True,
    }
    config = Qwen3VLConfig(
        text_config=text,
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": TEXT["hidden_size"],
            "patch_size": 16,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "num_position_embeddings": 16,
            "deepstack_visual_indexes": [0],
        },
        **_qwen_ids(tok),
    )
    return _save(out, _seeded(Qwen3VLForConditionalGeneration, config, seed), processor)


# -- LLaVA-1.5, LLaVA-NeXT, LLaVA-OneVision ----------------------------------------------------
_CHATML_SPECIALS = ["<|im_start|>", "<image>", "<video>"]
_LLAVA_TEMPLATE = chat_template(
    turn="<|im_start|>{role}\\n", end="<|im_end|>\\n", image="<image>\\n"
)
#: Vision tower shared by the LLaVA family: 32-px images, 8-px patches (16 patches).
_TOWER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 32,
    "patch_size": 8,
}


def _chatml_tokenizer() -> Any:
    return make_tokenizer(
        _CHATML_SPECIALS,
        eos="<|im_end|>",
        pad="<|endoftext|>",
        attrs={"image_token": "<image>", "video_token": "<video>"},
    )


def _llama_text(tokenizer: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model_type": "llama",
        **TEXT,
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "bos_token_id": tokenizer.bos_token_id,
        **extra,
    }


def build_llava(out: Path, seed: int = 0) -> Path:
    from transformers import (
        CLIPImageProcessorPil,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
    )

    tok = _chatml_tokenizer()
    processor = LlavaProcessor(
        image_processor=CLIPImageProcessorPil(
            size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
        ),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_TEMPLATE,
    )
    config = LlavaConfig(
        vision_config={"model_type": "clip_vision_model", **_TOWER, "projection_dim": 32},
        text_config=_llama_text(tok),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    return _save(out, _seeded(LlavaForConditionalGeneration, config, seed), processor)


_PINPOINTS = [[32, 64], [64, 32], [64, 64]]


def build_llava_next(out: Path, seed: int = 0) -> Path:
    from transformers import (
        LlavaNextConfig,
        LlavaNextForConditionalGeneration,
        LlavaNextImageProcessorPil,
        LlavaNextProcessor,
    )

    tok = _chatml_tokenizer()
    processor = LlavaNextProcessor(
        image_processor=LlavaNextImageProcessorPil(
            size={"shortest_edge": 32},
            crop_size={"height": 32, "width": 32},
            image_grid_pinpoints=_PINPOINTS,
        ),
        tokenizer=tok,
        patch_size=8,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=_LLAVA_TEMPLATE,
    )
    config = LlavaNextConfig(
        vision_config={"model_type": "clip_vision_model", **_TOWER, "projection_dim": 32},
        text_config=_llama_text(tok),
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=_PINPOINTS,
        image_seq_length=16,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
    )
    return _save(out, _seeded(LlavaNextForConditionalGeneration, config, seed), processor)


def build_llava_onevision(out: Path, seed: int = 0) -> Path:
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionImageProcessorPil,
        LlavaOnevisionProcessor,
    )

    tok = _chatml_tokenizer()
    processor = image_only(LlavaOnevisionProcessor)(
        image_processor=LlavaOnevisionImageProcessorPil(
            size={"height": 32, "width": 32}, image_grid_pinpoints=_PINPOINTS
        ),
        tokenizer=tok,
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        chat_template=_LLAVA_TEMPLATE,
    )
    config = LlavaOnevisionConfig(
        vision_config={"model_type": "siglip_vision_model", **_TOWER},
        text_config={**_llama_text(tok), "model_type": "qwen2"},
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"),
        image_grid_pinpoints=_PINPOINTS,
        vision_feature_layer=-1,
        vision_feature_select_strategy="full",
    )
    return _save(out, _seeded(LlavaOnevisionForConditionalGeneration, config, seed), processor)


# -- Idefics3 ----------------------------------------------------------------------------------
_IDEFICS_SPECIALS = [
    "<fake_token_around_image>",
    "<image>",
    "<global-img>",
    *(f"<row_{r}_col_{c}>" for r in range(1, 7) for c in range(1, 7)),
]


_IDEFICS_TEMPLATE = chat_template(
    prefix="<|im_start|>",
    turn="{role}:",
    end="<end_of_utterance>\\n",
    image="<image>",
    user="User",
    assistant="Assistant",
)


def build_idefics3(out: Path, seed: int = 0) -> Path:
    from transformers import (
        Idefics3Config,
        Idefics3ForConditionalGeneration,
        Idefics3ImageProcessorPil,
        Idefics3Processor,
    )

    tok = make_tokenizer(
        _IDEFICS_SPECIALS,
        bos="<|im_start|>",
        eos="<end_of_utterance>",
        pad="<|endoftext|>",
        attrs={"image_token": "<image>"},
    )
    processor = Idefics3Processor(
        image_processor=Idefics3ImageProcessorPil(
            size={"longest_edge": 64},
            max_image_size={"longest_edge": 32},
            do_image_splitting=True,
        ),
        tokenizer=tok,
        image_seq_len=4,
        chat_template=_IDEFICS_TEMPLATE,
    )
    config = Idefics3Config(
        vision_config={k: v for k, v in _TOWER.items()},
        text_config=_llama_text(tok),
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    return _save(out, _seeded(Idefics3ForConditionalGeneration, config, seed), processor)


def build_smolvlm(out: Path, seed: int = 0) -> Path:
    from transformers import (
        SmolVLMConfig,
        SmolVLMForConditionalGeneration,
        SmolVLMImageProcessorPil,
        SmolVLMProcessor,
    )

    tok = make_tokenizer(
        _IDEFICS_SPECIALS,
        bos="<|im_start|>",
        eos="<end_of_utterance>",
        pad="<|endoftext|>",
        attrs={
            "image_token": "<image>",
            "fake_image_token": "<fake_token_around_image>",
            "global_image_token": "<global-img>",
            "end_of_utterance_token": "<end_of_utterance>",
        },
    )
    processor = image_only(SmolVLMProcessor)(
        image_processor=SmolVLMImageProcessorPil(
            size={"longest_edge": 64},
            max_image_size={"longest_edge": 32},
            do_image_splitting=True,
        ),
        tokenizer=tok,
        video_processor=None,
        image_seq_len=4,
        chat_template=_IDEFICS_TEMPLATE,
    )
    config = SmolVLMConfig(
        vision_config=dict(_TOWER),
        text_config=_llama_text(tok),
        image_token_id=tok.convert_tokens_to_ids("<image>"),
        scale_factor=2,
    )
    return _save(out, _seeded(SmolVLMForConditionalGeneration, config, seed), processor)


# -- Gemma 3, PaliGemma ------------------------------------------------------------------------
def build_gemma3(out: Path, seed: int = 0) -> Path:
    from transformers import (
        Gemma3Config,
        Gemma3ForConditionalGeneration,
        Gemma3ImageProcessorPil,
        Gemma3Processor,
    )

    tok = make_tokenizer(
        [
            "<start_of_turn>",
            "<end_of_turn>",
            "<start_of_image>",
            "<end_of_image>",
            "<image_soft_token>",
        ],
        bos="<bos>",
        eos="<eos>",
        pad="<pad>",
        prepend_bos=True,
        attrs={
            "boi_token": "<start_of_image>",
            "eoi_token": "<end_of_image>",
            "image_token": "<image_soft_token>",
        },
    )
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessorPil(size={"height": 32, "width": 32}),
        tokenizer=tok,
        image_seq_length=4,
        chat_template=chat_template(
            prefix="<bos>",
            turn="<start_of_turn>{role}\\n",
            end="<end_of_turn>\\n",
            image="<start_of_image>",
            assistant="model",
        ),
    )
    ids = tok.convert_tokens_to_ids
    config = Gemma3Config(
        vision_config={"model_type": "siglip_vision_model", **_TOWER},
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "query_pre_attn_scalar": TEXT["head_dim"],
            "sliding_window": 16,
            # one full-attention layer, or the answer position never sees the image tokens
            "layer_types": ["sliding_attention", "full_attention"],
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
            "bos_token_id": tok.bos_token_id,
        },
        mm_tokens_per_image=4,
        boi_token_index=ids("<start_of_image>"),
        eoi_token_index=ids("<end_of_image>"),
        image_token_index=ids("<image_soft_token>"),
    )
    return _save(out, _seeded(Gemma3ForConditionalGeneration, config, seed), processor)


def build_paligemma(out: Path, seed: int = 0) -> Path:
    from transformers import (
        PaliGemmaConfig,
        PaliGemmaForConditionalGeneration,
        PaliGemmaProcessor,
        SiglipImageProcessorPil,
    )

    tok = make_tokenizer(
        ["<image>"], bos="<bos>", eos="<eos>", pad="<pad>", attrs={"image_token": "<image>"}
    )
    image_processor = SiglipImageProcessorPil(size={"height": 32, "width": 32})
    image_processor.image_seq_length = 16
    # PaliGemma checkpoints ship no chat template; a prefix-LM prompt "<image><bos>question\n"
    # is what the processor builds around the text, so the template only places the image.
    processor = PaliGemmaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        chat_template=chat_template(turn="", end="", image="<image>"),
    )
    tok = processor.tokenizer  # the processor adds <loc>/<seg> tokens
    config = PaliGemmaConfig(
        vision_config={"model_type": "siglip_vision_model", **_TOWER, "projection_dim": 64},
        text_config={
            "model_type": "gemma",
            **TEXT,
            "vocab_size": len(tok),
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
            "bos_token_id": tok.bos_token_id,
        },
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        projection_dim=TEXT["hidden_size"],
    )
    return _save(out, _seeded(PaliGemmaForConditionalGeneration, config, seed), processor)


# -- InternVL ----------------------------------------------------------------------------------
def build_internvl(out: Path, seed: int = 0) -> Path:
    from transformers import (
        GotOcr2ImageProcessorPil,
        InternVLConfig,
        InternVLForConditionalGeneration,
        InternVLProcessor,
    )

    tok = make_tokenizer(
        ["<|im_start|>", "<img>", "</img>", "<IMG_CONTEXT>", "<video>"],
        eos="<|im_end|>",
        pad="<|endoftext|>",
        attrs={
            "start_image_token": "<img>",
            "end_image_token": "</img>",
            "context_image_token": "<IMG_CONTEXT>",
            "video_token": "<video>",
        },
    )
    processor = image_only(InternVLProcessor)(
        image_processor=GotOcr2ImageProcessorPil(
            size={"height": 32, "width": 32}, crop_to_patches=True, max_patches=4
        ),
        tokenizer=tok,
        image_seq_length=4,
        chat_template=chat_template(
            turn="<|im_start|>{role}\\n", end="<|im_end|>\\n", image="<IMG_CONTEXT>\\n"
        ),
    )
    config = InternVLConfig(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "image_size": [32, 32],
            "patch_size": [8, 8],
        },
        text_config={**_llama_text(tok), "model_type": "qwen2"},
        image_token_id=tok.convert_tokens_to_ids("<IMG_CONTEXT>"),
        image_seq_length=4,
        downsample_ratio=0.5,
    )
    return _save(out, _seeded(InternVLForConditionalGeneration, config, seed), processor)


# -- Mllama ------------------------------------------------------------------------------------
def build_mllama(out: Path, seed: int = 0) -> Path:
    from transformers import (
        MllamaConfig,
        MllamaForConditionalGeneration,
        MllamaImageProcessorPil,
        MllamaProcessor,
    )

    tok = make_tokenizer(
        ["<|image|>", "<|start_header_id|>", "<|end_header_id|>", "<|python_tag|>"],
        bos="<|begin_of_text|>",
        eos="<|eot_id|>",
        pad="<|finetune_right_pad_id|>",
        prepend_bos=True,
        attrs={"image_token": "<|image|>"},
    )
    processor = MllamaProcessor(
        image_processor=MllamaImageProcessorPil(
            size={"height": 32, "width": 32}, max_image_tiles=2
        ),
        tokenizer=tok,
        chat_template=chat_template(
            prefix="<|begin_of_text|>",
            turn="<|start_header_id|>{role}<|end_header_id|>\\n\\n",
            end="<|eot_id|>",
            image="<|image|>",
        ),
    )
    config = MllamaConfig(
        vision_config={
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_hidden_layers": 1,
            "num_global_layers": 1,
            "attention_heads": 2,
            "image_size": 32,
            "patch_size": 8,
            "max_num_tiles": 2,
            "intermediate_layers_indices": [0],
            "vision_output_dim": 64,
            "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]],
        },
        text_config={
            **{k: v for k, v in TEXT.items() if k != "head_dim"},
            "num_hidden_layers": 3,
            "cross_attention_layers": [1],
            "vocab_size": len(tok),
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
            "bos_token_id": tok.bos_token_id,
        },
        image_token_index=tok.convert_tokens_to_ids("<|image|>"),
    )
    return _save(out, _seeded(MllamaForConditionalGeneration, config, seed), processor)


@dataclass(frozen=True)
class Family:
    """A buildable family: its builder and what the gap probe pools (docs/spec.md §5)."""

    name: str
    build: Callable[[Path, int], Path]
    #: Which tower layer and which tokens ``vision_features`` averages, in words.
    pooled: str


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("llava", build_llava, "CLIP tower, last encoder layer, patch tokens (CLS dropped)"),
        Family(
            "llava_next",
            build_llava_next,
            "CLIP tower, last encoder layer, patch tokens (CLS dropped) of the base view and "
            "every any-res crop, averaged together",
        ),
        Family(
            "llava_onevision",
            build_llava_onevision,
            "SigLIP tower, last layer (post-layernorm), all patch tokens (no CLS) of the base "
            "view and every any-res crop",
        ),
        Family(
            "qwen2_vl",
            build_qwen2_vl,
            "Qwen2-VL tower, last block before the patch merger, every 14-px patch (no CLS)",
        ),
        Family(
            "qwen2_5_vl",
            build_qwen2_5_vl,
            "Qwen2.5-VL tower, last block before the patch merger, every 14-px patch (no CLS)",
        ),
        Family(
            "qwen3_vl",
            build_qwen3_vl,
            "Qwen3-VL tower, last block before the patch merger, every 16-px patch (no CLS)",
        ),
        Family(
            "idefics3",
            build_idefics3,
            "SigLIP-style tower, last layer (post-layernorm), patch tokens of every real crop "
            "and the global view (padding crops dropped)",
        ),
        Family(
            "smolvlm",
            build_smolvlm,
            "SigLIP-style tower, last layer (post-layernorm), patch tokens of every real crop "
            "and the global view (padding crops dropped)",
        ),
        Family(
            "gemma3",
            build_gemma3,
            "SigLIP tower, last layer (post-layernorm), all patch tokens before the 2x2 pooling",
        ),
        Family(
            "paligemma",
            build_paligemma,
            "SigLIP tower, last layer (post-layernorm), all patch tokens",
        ),
        Family(
            "internvl",
            build_internvl,
            "InternViT tower, last layer, patch tokens (CLS dropped) of every crop and the "
            "thumbnail, before pixel shuffle",
        ),
        Family(
            "mllama",
            build_mllama,
            "Mllama tower, global-transformer output, patch tokens of every real tile (class "
            "token and tile padding dropped)",
        ),
    )
}


def build(name: str, out: str | Path, seed: int = 0) -> Path:
    """Write family ``name``'s tiny checkpoint to ``out`` (created); returns the folder."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}; known: {', '.join(FAMILIES)}")
    path = FAMILIES[name].build(Path(out), seed)
    (path / "tiny_family.json").write_text(json.dumps({"family": name, "seed": seed}))
    return path


# -- families that cannot run here, each with a check that the reason still holds -------------
def _pixtral_processor() -> None:
    import transformers

    transformers.PixtralProcessor(image_processor=None, tokenizer=None)


def _llama4_image_processor() -> None:
    import transformers

    transformers.Llama4ImageProcessor()


#: Family -> (why it cannot run with torch 2.13 CPU and no torchvision, a call that raises for
#: exactly that reason). ``test_architectures`` runs each check, so the list cannot go stale.
UNSUPPORTED: dict[str, tuple[str, Callable[[], None]]] = {
    "mistral3": (
        "PixtralProcessor (Mistral 3, Pixtral) requires torchvision, whose wheels do not import "
        "beside the CPU torch 2.13",
        _pixtral_processor,
    ),
    "llama4": (
        "Llama4ImageProcessor has no PIL version and requires torchvision",
        _llama4_image_processor,
    ),
}


def unsupported_reason(name: str) -> str:
    """Why family ``name`` cannot run here (``KeyError`` for a supported one)."""
    return UNSUPPORTED[name][0]
