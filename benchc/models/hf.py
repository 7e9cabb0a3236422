"""The Hugging Face backend: any transformers VLM with a processor and a chat template.

One forward pass per batch reads the next-token logits at the answer position only
(``logits_to_keep=1`` where the model supports it); option logits are letter log-probabilities
(logsumexp over each letter's single-token variants, float32), so ``softmax`` over a row's K
entries is the option distribution p and ``logsumexp`` over them is log ``option_mass``.

By concern: loading and arguments (:mod:`benchc.models.hf_load`), the processor and prompt
(:mod:`benchc.models.hf_prompt`), batching and forward (:mod:`benchc.models.hf_batch`),
option-logit extraction (:mod:`benchc.models.hf_logits`); this module puts them together.
"""

from __future__ import annotations

import importlib.util
import inspect
import threading
from collections.abc import Mapping
from typing import Any

import torch

from benchc.models.args import HF_ARGS, fingerprint_part
from benchc.models.base import Backend, Capabilities
from benchc.models.gpus import FLASH, load_with_attention, worker_gpus
from benchc.models.hf_batch import HFBatch, PreparedBatch, _describe, _raise_if_bad, _sub_batch
from benchc.models.hf_load import (
    _DTYPES,
    _chat_template,
    _checked_args,
    _has_tower,
    _load_model,
    _load_processor,
    _quantization_config,
    _resolve_dtype,
)
from benchc.models.hf_logits import _option_logits
from benchc.models.hf_prompt import _TRAINING_KEYS, HFPrompt
from benchc.models.letters import resolve_letters
from benchc.models.processors import image_backend
from benchc.models.prompt import template_kwargs
from benchc.models.source import Source, folder_hash, resolve_source, slug
from benchc.models.text_side import TextSide
from benchc.spec import PROMPT_VERSION

__all__ = [  # the pieces' names, importable from here as before the split
    "_DTYPES",
    "_TRAINING_KEYS",
    "HFBackend",
    "PreparedBatch",
    "_chat_template",
    "_checked_args",
    "_describe",
    "_has_tower",
    "_load_model",
    "_load_processor",
    "_option_logits",
    "_quantization_config",
    "_raise_if_bad",
    "_resolve_dtype",
    "_sub_batch",
]


class HFBackend(HFPrompt, HFBatch, Backend):
    """A transformers image-text-to-text model scored by option-letter logits (docs/spec.md §2).

    ``device=None`` picks CUDA when available (``device_map="auto"`` across several GPUs), else
    CPU; ``dtype=None`` picks bf16 on CUDA and fp32 on CPU. ``image_size`` (longer side, pixels)
    resizes query images before the processor; ``None`` passes them as given.
    """

    def __init__(
        self,
        model_id_or_path: str,
        *,
        revision: str | None = None,
        trust_remote_code: bool = False,
        device: str | torch.device | None = None,
        dtype: str | torch.dtype | None = None,
        batch_size: int = 16,
        image_size: int | None = None,
        attn_implementation: str | None = None,
        model_args: Mapping[str, Any] | None = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        args = _checked_args(model_args, dtype, attn_implementation)
        self.model_args = args
        self.source: Source = resolve_source(model_id_or_path, revision)
        device_map, limits = self._place(device, args.get("device_map"))
        dtype = args.get("dtype", args.get("torch_dtype", dtype))
        self.dtype = _resolve_dtype(None if dtype == "auto" else dtype, self.device)
        self.batch_size = batch_size
        self.image_size = image_size
        self.trust_remote_code = trust_remote_code
        self._open_processor(args)
        default_attn = self._open_model(args, dtype, device_map, limits)
        self._init_state()
        self._identify(args, default_attn)

    def _place(self, device: str | torch.device | None, device_map: Any) -> tuple[Any, Any]:
        """Where the model goes: :attr:`device`, :attr:`gpu_share`; returns the ``device_map``
        (``auto`` across several GPUs when accelerate is installed) and the GPUs' limits."""
        #: The GPUs this process spreads the model over (``device_map`` under xdist: each
        #: worker its own share; refused with the fix when they do not divide).
        self.gpu_share, limits = worker_gpus(device_map)
        multi_gpu = device is None and torch.cuda.is_available() and torch.cuda.device_count() > 1
        if multi_gpu and device_map is None and importlib.util.find_spec("accelerate"):
            device_map = "auto"  # without accelerate: the first GPU only
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        return device_map, limits

    def _open_processor(self, args: Mapping[str, Any]) -> None:
        """The processor (left-padding tokenizer) and the chat template."""
        processor_kwargs = {k: v for k, v in args.items() if HF_ARGS[k].target == "processor"}
        self.processor = _load_processor(self.source, self.trust_remote_code, processor_kwargs)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.chat_template = _chat_template(self.processor, self.source)
        self._template_kwargs = template_kwargs(self.chat_template)

    def _open_model(
        self, args: Mapping[str, Any], dtype: Any, device_map: Any, limits: Any
    ) -> str | None:
        """The model, loaded with its attention kernel, placed and in eval mode, and what
        scoring reads off it; returns the kernel chosen by default."""
        extra = {
            k: v
            for k, v in args.items()
            if HF_ARGS[k].target == "model" and k not in ("device_map", "dtype", "torch_dtype")
        }

        def load(attention: str | None) -> torch.nn.Module:
            if attention is not None:
                extra["attn_implementation"] = attention
            return _load_model(
                self.source,
                trust_remote_code=self.trust_remote_code,
                dtype="auto" if dtype == "auto" else self.dtype,
                device_map=device_map,
                extra={**extra, **({"max_memory": limits} if limits else {})},
            )

        #: The summary's line on the attention kernel (CUDA only).
        self.model, default_attn, self.attention_note = load_with_attention(
            load, cuda=self.device.type == "cuda", given=args.get("attn_implementation")
        )
        #: The attention kernel the model runs (part of a distributed run's device class).
        self.attention = args.get("attn_implementation") or default_attn
        if dtype == "auto":
            self.dtype = next(self.model.parameters()).dtype
        if device_map is None and "quantization" not in args:
            self.model.to(self.device)
        self.model.eval()
        self.capabilities = Capabilities(vision_tower=_has_tower(self.model))
        self._input_device = next(self.model.parameters()).device
        params = inspect.signature(self.model.forward).parameters
        self._keep_kwargs = next(
            ({name: 1} for name in ("logits_to_keep", "num_logits_to_keep") if name in params), {}
        )
        self.letters = resolve_letters(self.tokenizer)
        return default_attn

    def _init_state(self) -> None:
        """Batching's and the prompts' memos; the processor's worker processes on CUDA."""
        #: Largest batch that fit after a CUDA out-of-memory error (None: no limit seen yet).
        self.max_rows: int | None = None
        #: Largest batch that ran (reported with :attr:`max_rows` in :meth:`notes`).
        self.largest_batch = 0
        self._image_shape_matters: bool | None = None
        self._tokenizer_lock = threading.RLock()
        self._prompts: dict[str, str] = {}  # user text -> rendered prompt
        self._text_tokens: dict[str, int] = {}  # rendered prompt -> its text tokens
        self._image_tokens: dict[tuple[int, int], int] = {}  # image (H, W) -> image tokens
        self._copy_stream: Any = None
        self._processor_pool: Any = None
        self._text_sides: tuple[Any, TextSide] | None = None
        if self.device.type == "cuda":  # beside a CPU model the cores are busy already
            from benchc.models.workers import default_workers

            self.use_processor_workers(default_workers(self.processor_ms(), self.device.type))

    def _identify(self, args: Mapping[str, Any], default_attn: str | None) -> None:
        """:attr:`name` and :attr:`fingerprint` (what identifies stored results)."""
        base = self.source.spec if self.source.is_hub else self.source.path.name
        self.name = slug(base)
        ident = self.source.revision or f"sha256-{folder_hash(self.source.path)[:16]}"
        dtype_name = str(self.dtype).removeprefix("torch.")
        size = f":img{self.image_size}" if self.image_size else ""
        # Only a non-PIL image processor and output-changing model args are named: existing
        # fingerprints stay valid.
        images = image_backend(self.processor)
        images = "" if images == "pil" else f":{images}"
        named = {k: v for k, v in args.items() if k not in ("dtype", "torch_dtype")}
        if default_attn == FLASH:  # as if given: results under flash attention are their own
            named["attn_implementation"] = FLASH
        part = fingerprint_part(named, HF_ARGS)
        part = f":{part}" if part else ""
        self.fingerprint = f"hf:{base}@{ident}:{dtype_name}:{PROMPT_VERSION}{size}{images}{part}"

    @property
    def local_cpu(self) -> bool:
        return self._input_device.type == "cpu"

    def notes(self) -> list[str]:
        """The attention kernel on CUDA (flash attention or why not), and the batch size that
        fit after a CUDA out-of-memory error."""
        out = []
        if self.attention_note:
            out.append(f"{self.name}: {self.attention_note}")
        if self.max_rows is not None:
            out.append(
                f"{self.name}: CUDA out of memory at batch size {self.batch_size}; batches of "
                f"{self.max_rows} fit (largest run: {self.largest_batch}), pass "
                f"--batch-size {self.max_rows} to start there"
            )
        return out
