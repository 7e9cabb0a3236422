"""What a checkpoint is, recorded with a baseline: its files, configs and the settings used.

A baseline that names only ``"model": "fixtures/tiny-vlm"`` cannot tell a re-trained checkpoint
from an edited ``processor_config.json``: both read as a drop in the gates. So a recording keeps
the checkpoint's identity (:func:`checkpoint_identity`): a digest of every file (a hub snapshot's
resolved revision too), the parsed contents of its configs and templates (a digest cannot name
the key that changed) and what the backend actually used (image size, mean/std, rescale,
resample, crop, pixel budget, chat template, special tokens, generation settings; for a server,
the request settings and what its API reported). :mod:`benchc.gates.changes` compares two.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

#: Version of the identity's layout.
IDENTITY_FORMAT = 1
#: Weight files: compared as same or changed (with their per-module change when local).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack")
#: Config and template files whose contents are kept (larger ones: their digest only).
CONFIG_SUFFIXES = (".json", ".jinja", ".txt")
CONFIG_MAX_BYTES = 256 * 1024
#: Files read as parts (the vocabulary is a digest; the tokens and pipeline are named).
TOKENIZER_JSON = "tokenizer.json"
_CHUNK = 2**20
#: In-process digests of large files: ``(path, size, mtime_ns) -> sha256``.
_DIGESTS: dict[tuple[str, int, int], str] = {}
#: The image processor's settings that decide the pixels a model sees.
IMAGE_KEYS = (
    "image_processor_type", "size", "crop_size", "do_resize", "do_center_crop", "do_rescale",
    "rescale_factor", "do_normalize", "image_mean", "image_std", "resample", "do_convert_rgb",
    "do_pad", "min_pixels", "max_pixels", "patch_size", "merge_size", "temporal_patch_size",
    "longest_edge", "shortest_edge", "max_image_tiles", "do_image_splitting",
)  # fmt: skip
#: PIL's resampling filters by number (``resample`` in a processor config).
RESAMPLE = {0: "nearest", 1: "lanczos", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming"}
#: The user text rendered through the template: the prompt the model sees, as recorded.
EXAMPLE_TEXT = "Question: example?\nOptions:\nA. one\nB. two\nAnswer with the option's letter."


def file_digest(path: Path) -> str:
    """SHA-256 of a file, streamed in 1 MiB chunks; cached by (path, size, mtime_ns)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _files(folder: Path) -> list[Path]:
    return sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def file_digests(folder: Path) -> dict[str, dict[str, Any]]:
    """Every file of a checkpoint folder: ``{relative name: {"sha256", "size"}}``."""
    folder = Path(folder)
    return {
        p.relative_to(folder).as_posix(): {"sha256": file_digest(p), "size": p.stat().st_size}
        for p in _files(folder)
    }


def is_weight(name: str) -> bool:
    return name.lower().endswith(WEIGHT_SUFFIXES)


def is_config(name: str, size: int) -> bool:
    lower = name.lower()
    if name.rsplit("/", 1)[-1] == TOKENIZER_JSON:
        return True
    if lower.endswith(".index.json") or is_weight(name):
        return False
    return lower.endswith(CONFIG_SUFFIXES) and size <= CONFIG_MAX_BYTES


def tokenizer_parts(data: Any) -> Any:
    """A ``tokenizer.json`` by parts: added tokens, pipeline and vocabulary size, the vocabulary
    itself as a digest (a changed vocabulary is named, not listed token by token)."""
    if not isinstance(data, dict):
        return data
    model = data.get("model") if isinstance(data.get("model"), dict) else {}
    vocab = model.get("vocab")
    parts = ("added_tokens", "normalizer", "pre_tokenizer", "post_processor", "decoder",
             "truncation", "padding")  # fmt: skip
    out = {k: data.get(k) for k in parts}
    out["model"] = {k: v for k, v in model.items() if k not in ("vocab", "merges")}
    if vocab is not None:
        out["model"]["vocab_size"] = len(vocab)
        out["model"]["vocab_sha256"] = _json_digest(vocab)
    if model.get("merges") is not None:
        out["model"]["merges_sha256"] = _json_digest(model["merges"])
    return out


def _json_digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


def config_contents(folder: Path) -> dict[str, Any]:
    """The parsed contents of a folder's configs and templates (JSON parsed, so re-formatted
    JSON with equal values is the same; other text as it is)."""
    folder = Path(folder)
    out: dict[str, Any] = {}
    for p in _files(folder):
        name = p.relative_to(folder).as_posix()
        if not is_config(name, p.stat().st_size):
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if name.lower().endswith(".json"):
            try:
                value: Any = json.loads(text)
            except ValueError:
                value = text
            out[name] = tokenizer_parts(value) if p.name == TOKENIZER_JSON else value
        else:
            out[name] = text
    return out


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON (a processor's SizeDict, tuples, enums: their plain form)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "items"):
        return {str(k): jsonable(v) for k, v in value.items() if v is not None}
    if hasattr(value, "value") and isinstance(value.value, (int, str)):
        return value.value
    return str(value)


def image_settings(image_processor: Any) -> dict[str, Any]:
    """The preprocessing an image processor applies (the keys it sets of :data:`IMAGE_KEYS`)."""
    try:
        raw = image_processor.to_dict()
    except Exception:
        raw = dict(vars(image_processor))
    raw.setdefault("image_processor_type", type(image_processor).__name__)
    out = {k: jsonable(raw[k]) for k in IMAGE_KEYS if raw.get(k) is not None}
    if isinstance(out.get("resample"), int):
        out["resample"] = RESAMPLE.get(out["resample"], out["resample"])
    return out


def hf_settings(backend: Any) -> dict[str, Any]:
    """What a Hugging Face backend uses: preprocessing, prompt, special tokens, generation."""
    out: dict[str, Any] = {}
    image_processor = getattr(backend.processor, "image_processor", None)
    if image_processor is not None:
        out["image processor"] = image_settings(image_processor)
    out["--image-size"] = getattr(backend, "image_size", None)
    out["dtype"] = str(getattr(backend, "dtype", "")).removeprefix("torch.")
    tok = backend.tokenizer
    out["special tokens"] = jsonable(getattr(tok, "special_tokens_map", {}))
    out["padding side"] = getattr(tok, "padding_side", None)
    out["chat template"] = getattr(backend, "chat_template", None)
    try:
        out["prompt (example)"] = backend.render(EXAMPLE_TEXT)
    except Exception as exc:  # a template that cannot render: the run's own check says so
        out["prompt (example)"] = f"<cannot render: {type(exc).__name__}>"
    gen = getattr(getattr(backend, "model", None), "generation_config", None)
    if gen is not None:
        diff = jsonable(gen.to_diff_dict())
        out["generation"] = {k: v for k, v in diff.items() if k != "transformers_version"}
    return out


#: A served model's request settings (what the client sends and so what the server computes).
SERVER_KEYS = ("model", "base_url", "logprobs", "top_logprobs", "n_samples", "temperature",
               "max_tokens", "extra_body", "seed")  # fmt: skip


def server_settings(backend: Any) -> dict[str, Any]:
    """A served backend's request settings and what its API reported (model id, fingerprint)."""
    out = {k: jsonable(getattr(backend, k)) for k in SERVER_KEYS if hasattr(backend, k)}
    served = getattr(backend, "served", None)
    if served:
        out["server reported"] = jsonable(served)
    return out


def checkpoint_identity(backend: Any, model: str | None = None) -> dict[str, Any]:
    """The identity of the checkpoint ``backend`` runs (``model``: as the command line gave it).

    A local folder (or a hub snapshot, with its revision): every file's digest and its configs'
    contents; a Hugging Face backend: the settings it uses; a server: its request settings and
    what it reported; any other backend: its name and fingerprint."""
    out: dict[str, Any] = {
        "format": IDENTITY_FORMAT,
        "name": getattr(backend, "name", None),
        "fingerprint": getattr(backend, "fingerprint", None),
    }
    if model is not None:
        out["model"] = model
    while getattr(backend, "inner", None) is not None:  # a wrapper: the checkpoint it runs
        backend = backend.inner
    source = getattr(backend, "source", None)
    folder = getattr(source, "path", None)
    if folder is not None and Path(folder).is_dir():
        out["revision"] = getattr(source, "revision", None)
        out["files"] = file_digests(Path(folder))
        out["configs"] = config_contents(Path(folder))
    if hasattr(backend, "processor") and hasattr(backend, "tokenizer"):
        out["settings"] = hf_settings(backend)
    elif hasattr(backend, "base_url"):
        out["settings"] = server_settings(backend)
    return out


__all__ = [
    "IDENTITY_FORMAT",
    "checkpoint_identity",
    "config_contents",
    "file_digest",
    "file_digests",
    "hf_settings",
    "image_settings",
    "is_config",
    "is_weight",
    "jsonable",
    "server_settings",
    "tokenizer_parts",
]
