"""``--model-args key=value,...`` (lm-evaluation-harness's convention), parsed and validated.

Each backend declares the keys it accepts (its entry in :mod:`benchc.models.registry` carries
the schema) with a converter that turns the command-line text into a typed value or raises
``ValueError`` saying what is wrong. Parsing is pure and imports nothing heavy, so a typo is one
usage error before any model loads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

Converter = Callable[[str], Any]


def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low in {"true", "1", "yes", "on"}:
        return True
    if low in {"false", "0", "no", "off"}:
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


def _int(lo: int, hi: int | None = None) -> Converter:
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not an integer") from None
        if value < lo or (hi is not None and value > hi):
            bound = f"in {lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"{value} is not {bound}")
        return value

    return convert


def _float(lo: float, *, open_low: bool = False) -> Converter:
    def convert(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        if value < lo or (open_low and value == lo):
            raise ValueError(f"{value} must be {'>' if open_low else '>='} {lo}")
        return value

    return convert


def _choice(*choices: str) -> Converter:
    def convert(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return convert


def _device_map(text: str) -> str:
    """``auto``, ``balanced``, ``balanced_low_0``, ``sequential`` or one device (``cuda:1``)."""
    named = {"auto", "balanced", "balanced_low_0", "sequential", "cpu", "cuda", "mps"}
    if text in named or (text.startswith("cuda:") and text[5:].isdigit()):
        return text
    raise ValueError(f"{text!r} is not auto, balanced, balanced_low_0, sequential or a device")


def _json_object(text: str) -> dict:
    """A JSON object, e.g. ``{"generation_config": "{\\"do_sample\\": true}"}``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{text!r} is not JSON ({exc.msg} at character {exc.pos})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{text!r} is not a JSON object")
    return value


def _str(text: str) -> str:
    if not text:
        raise ValueError("empty value")
    return text


@dataclass(frozen=True)
class ArgSpec:
    """One accepted key: its converter, where it goes, and whether it changes model outputs
    (then it enters the fingerprint, so cached results are not reused across it)."""

    convert: Converter
    target: str  # "model" (from_pretrained), "processor" (processor / image processor), "backend"
    changes_outputs: bool
    help: str


DTYPES = ("float32", "bfloat16", "float16", "auto")

#: Keys of the Hugging Face backend.
HF_ARGS: dict[str, ArgSpec] = {
    "device_map": ArgSpec(_device_map, "model", False, "accelerate placement, e.g. auto"),
    "attn_implementation": ArgSpec(
        _choice("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"),
        "model",
        True,
        "attention kernel",
    ),
    "torch_dtype": ArgSpec(_choice(*DTYPES), "model", True, "weights dtype (same as --dtype)"),
    "dtype": ArgSpec(_choice(*DTYPES), "model", True, "weights dtype (same as --dtype)"),
    "quantization": ArgSpec(
        _choice("bnb-8bit", "bnb-4bit"), "model", True, "bitsandbytes quantization config"
    ),
    "max_pixels": ArgSpec(_int(1), "processor", True, "Qwen-VL processors: max image pixels"),
    "min_pixels": ArgSpec(_int(1), "processor", True, "Qwen-VL processors: min image pixels"),
}

#: Keys of the OpenAI-compatible backend (constructor keywords of ``OpenAIProxyBackend``).
OPENAI_ARGS: dict[str, ArgSpec] = {
    "logprobs": ArgSpec(_bool, "backend", True, "ask for top_logprobs (false: sampling only)"),
    "top_logprobs": ArgSpec(_int(1, 20), "backend", True, "top-k log-probs asked per query"),
    "n_samples": ArgSpec(_int(1), "backend", True, "sampling proxy: replies per query"),
    "temperature": ArgSpec(
        _float(0.0, open_low=True), "backend", True, "sampling proxy temperature"
    ),
    "concurrency": ArgSpec(_int(1), "backend", False, "requests in flight"),
    "max_retries": ArgSpec(
        _int(0), "backend", False, "retries per request at most (default: retry_budget_s only)"
    ),
    "backoff_s": ArgSpec(_float(0.0), "backend", False, "first retry delay (doubles; 0.5)"),
    "max_backoff_s": ArgSpec(_float(0.0), "backend", False, "longest retry delay (10)"),
    "retry_budget_s": ArgSpec(
        _float(0.0), "backend", False, "seconds a request keeps retrying transient faults (90)"
    ),
    "content_retries": ArgSpec(
        _int(0), "backend", False, "re-asks of an answer that does not fit the route (3)"
    ),
    "timeout_s": ArgSpec(
        _float(0.0, open_low=True), "backend", False, "one attempt's timeout (60)"
    ),
    "heartbeat_s": ArgSpec(
        _float(0.0), "backend", False, "seconds between liveness lines while waiting (60; 0 off)"
    ),
    "rate_limit": ArgSpec(
        _float(0.0, open_low=True), "backend", False, "max requests per second (all threads)"
    ),
    "api_key_env": ArgSpec(_str, "backend", False, "environment variable holding the API key"),
    "max_tokens": ArgSpec(_int(1), "backend", True, "sampling proxy: reply length in tokens"),
    "extra_body": ArgSpec(
        _json_object, "backend", True, "JSON object merged into every request (server switches)"
    ),
}


def split_model_args(text: str | None) -> dict[str, str]:
    """``"a=1,b=x"`` -> ``{"a": "1", "b": "x"}``; raises ``ValueError`` on bad syntax."""
    if text is None or not text.strip():
        return {}
    out: dict[str, str] = {}
    for item in _top_level_items(text):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(f"expected key=value, got {item.strip()!r}")
        if key in out:
            raise ValueError(f"key {key!r} given twice")
        out[key] = value
    return out


def _top_level_items(text: str) -> list[str]:
    """``text`` split at commas outside JSON brackets and strings (``extra_body={"a": 1, ...}``)."""
    items, depth, start, quoted, escaped = [], 0, 0, False, False
    for i, ch in enumerate(text):
        if quoted:
            escaped, quoted = (not escaped and ch == "\\"), quoted and (escaped or ch != '"')
            continue
        if ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth <= 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def typed_model_args(
    text: str | None, schema: Mapping[str, ArgSpec], backend: str
) -> dict[str, Any]:
    """``text`` split, each value converted by ``schema`` (the keys ``backend`` accepts; see
    :func:`benchc.models.registry.parse_model_args`); ``ValueError`` names the key."""
    raw = split_model_args(text)
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in schema:
            known = ", ".join(sorted(schema)) or "none"
            raise ValueError(f"unknown key {key!r} for the {backend} backend; known: {known}")
        try:
            out[key] = schema[key].convert(value)
        except ValueError as exc:
            raise ValueError(f"{key}={value!r}: {exc}") from None
    if "dtype" in out and "torch_dtype" in out and out["dtype"] != out["torch_dtype"]:
        raise ValueError("dtype and torch_dtype disagree; give one")
    return out


def fingerprint_part(args: Mapping[str, Any], schema: Mapping[str, ArgSpec]) -> str:
    """Canonical ``k=v`` of the output-changing args (empty when none), for the fingerprint."""
    items = [f"{k}={args[k]}" for k in sorted(args) if schema[k].changes_outputs]
    return ",".join(items)
