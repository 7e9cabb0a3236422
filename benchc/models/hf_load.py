"""The Hugging Face backend (:mod:`benchc.models.hf`), loading and arguments: ``--model-args``
checked and merged, the dtype resolved, the processor, chat template and model loaded from a
checkpoint (safetensors only)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Any

import torch

from benchc.models.args import HF_ARGS
from benchc.models.processors import load_processor
from benchc.models.source import Source
from benchc.models.vision import find_vision_tower

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def _has_tower(model: torch.nn.Module) -> bool:
    try:
        find_vision_tower(model)
    except ValueError:
        return False
    return True


def _resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _DTYPES[str(dtype).lower().removeprefix("torch.")]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {sorted(_DTYPES)}") from None


def _checked_args(
    model_args: Mapping[str, Any] | None, dtype: Any, attn_implementation: str | None
) -> dict[str, Any]:
    """Typed ``--model-args`` (see ``benchc.models.args``) merged with the keyword arguments."""
    args = dict(model_args or {})
    unknown = sorted(set(args) - set(HF_ARGS))
    if unknown:
        known = ", ".join(sorted(HF_ARGS))
        raise ValueError(
            f"unknown model args {', '.join(unknown)} for the hf backend; known: {known}"
        )
    given = args.get("dtype", args.get("torch_dtype"))
    if given is not None and dtype is not None and str(dtype).removeprefix("torch.") != given:
        raise ValueError(f"--dtype {dtype} and model args dtype={given} disagree; give one")
    if attn_implementation is not None:
        if args.get("attn_implementation", attn_implementation) != attn_implementation:
            raise ValueError("attn_implementation given twice with different values")
        args["attn_implementation"] = attn_implementation
    for key, package in (("device_map", "accelerate"), ("quantization", "bitsandbytes")):
        if key in args and importlib.util.find_spec(package) is None:
            raise ValueError(
                f"model args {key}={args[key]} need the {package} package "
                f"(pip install 'benchc[gpu]' or pip install {package})"
            )
    return args


def _load_processor(
    source: Source, trust_remote_code: bool, kwargs: Mapping[str, Any] | None = None
) -> Any:
    """The checkpoint's processor with the PIL image backend (``benchc.models.processors``)."""
    processor = load_processor(
        source.path, source.spec, trust_remote_code=trust_remote_code, **dict(kwargs or {})
    )
    if getattr(processor, "image_processor", None) is None or not hasattr(processor, "tokenizer"):
        raise ValueError(
            f"checkpoint {source.spec!r} has no multimodal processor "
            f"(found {type(processor).__name__}); "
            "a VLM checkpoint needs processor_config.json / preprocessor_config.json with an image "
            "processor and a tokenizer"
        )
    return processor


def _chat_template(processor: Any, source: Source) -> str:
    template = getattr(processor, "chat_template", None) or getattr(
        processor.tokenizer, "chat_template", None
    )
    if isinstance(template, dict):
        template = template.get("default")
    if not template:
        raise ValueError(
            f"checkpoint {source.spec!r} has no chat template (neither chat_template.jinja nor a "
            "'chat_template' entry in its processor or tokenizer config); benchc prompts every "
            "model through its own chat template"
        )
    return template


def _load_model(
    source: Source,
    *,
    trust_remote_code: bool,
    dtype: torch.dtype | str,
    device_map: str | None,
    extra: Mapping[str, Any],
) -> torch.nn.Module:
    """Try the image-text-to-text auto class, then causal-LM (remote-code VLM families).

    ``extra``: ``from_pretrained`` model args (``attn_implementation``,
    ``quantization`` = ``bnb-8bit`` / ``bnb-4bit``, turned into a ``BitsAndBytesConfig``)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    folder = source.path
    if folder.is_dir() and not any(folder.glob("*.safetensors")):
        pickled = sorted(p.name for p in folder.glob("*.bin")) + sorted(
            p.name for p in folder.glob("*.pt*")
        )
        raise ValueError(
            f"checkpoint {source.spec!r}: this checkpoint has no safetensors weights"
            + (f" (only pickled {', '.join(pickled[:3])})" if pickled else "")
            + "; benchc loads safetensors only, as pickles can run code: convert it with "
            "model.save_pretrained(dir, safe_serialization=True)"
        )
    kwargs: dict[str, Any] = {
        "dtype": dtype,
        "trust_remote_code": trust_remote_code,
        "use_safetensors": True,
    }
    if device_map is not None:
        kwargs["device_map"] = device_map
    for key, value in extra.items():
        if key == "quantization":
            kwargs["quantization_config"] = _quantization_config(value, dtype)
        else:
            kwargs[key] = value
    errors = []
    for auto in (AutoModelForImageTextToText, AutoModelForCausalLM):
        try:
            return auto.from_pretrained(str(source.path), **kwargs)
        except ValueError as err:  # "Unrecognized configuration class ..."
            errors.append(f"{auto.__name__}: {str(err).splitlines()[0]}")
    raise ValueError(f"checkpoint {source.spec!r}: no model class loads it ({'; '.join(errors)})")


def _quantization_config(name: str, dtype: torch.dtype | str) -> Any:
    """``bnb-8bit`` / ``bnb-4bit`` as a ``BitsAndBytesConfig`` (needs bitsandbytes and a GPU)."""
    from transformers import BitsAndBytesConfig

    if name == "bnb-8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    compute = dtype if isinstance(dtype, torch.dtype) else torch.bfloat16
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=compute)
