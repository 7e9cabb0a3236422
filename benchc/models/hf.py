"""The Hugging Face backend: any transformers VLM with a processor and a chat template.

One forward pass per batch reads the next-token logits at the answer position only
(``logits_to_keep=1`` where the model supports it); option logits are letter log-probabilities
(logsumexp over each letter's single-token variants, float32), so ``softmax`` over a row's K
entries is the option distribution p and ``logsumexp`` over them is log ``option_mass``.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchc.data.images import is_prepared, prepare
from benchc.models.args import HF_ARGS, fingerprint_part
from benchc.models.base import Backend, BatchOutput, Capabilities, Query
from benchc.models.gpus import FLASH, load_with_attention, worker_gpus
from benchc.models.letters import require_letters, resolve_letters
from benchc.models.processors import (
    image_backend,
    load_processor,
    process_batch,
    render_chat,
)
from benchc.models.prompt import chat_messages, template_kwargs
from benchc.models.source import Source, folder_hash, resolve_source, slug
from benchc.models.text_side import TextSide
from benchc.models.vision import (
    TowerOutput,
    find_vision_tower,
    pool_tower_output,
    pooled_vision_features,
)
from benchc.spec import LETTERS, PROMPT_VERSION, format_question

log = logging.getLogger(__name__)

_DTYPES = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


#: Processor outputs that are training targets, never model inputs for scoring.
_TRAINING_KEYS = frozenset({"labels"})


@dataclass
class PreparedBatch:
    """A batch as :meth:`HFBackend.prepare` leaves it: the rendered prompts and, unless the
    batch is larger than the size known to fit, its model inputs (on the device or on their
    way there; ``ready``: the CUDA copy's event and pinned buffers)."""

    images: list[np.ndarray]
    prompts: list[str]
    names: list[str]
    ks: list[int]
    inputs: dict[str, torch.Tensor] | None = None
    ready: Any = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.images)


def _sub_batch(batch: PreparedBatch, start: int, stop: int) -> PreparedBatch:
    return PreparedBatch(
        images=batch.images[start:stop],
        prompts=batch.prompts[start:stop],
        names=batch.names[start:stop],
        ks=batch.ks[start:stop],
    )


def _raise_if_bad(model: str, bad: torch.Tensor, names: Sequence[str]) -> None:
    """``ValueError`` naming the rows with NaN or infinite logits (``bad``: a (B,) bool mask)."""
    rows = torch.nonzero(bad.cpu()).flatten().tolist()
    if rows:
        raise ValueError(
            f"model {model} produced NaN or infinite next-token logits for "
            f"{', '.join(names[i] for i in rows)}"
        )


class HFBackend(Backend):
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
        device_map = args.get("device_map")
        #: The GPUs this process spreads the model over (``device_map`` under xdist: each
        #: worker its own share; refused with the fix when they do not divide).
        self.gpu_share, limits = worker_gpus(device_map)
        multi_gpu = device is None and torch.cuda.is_available() and torch.cuda.device_count() > 1
        if multi_gpu and device_map is None and importlib.util.find_spec("accelerate"):
            device_map = "auto"  # without accelerate: the first GPU only
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        dtype = args.get("dtype", args.get("torch_dtype", dtype))
        self.dtype = _resolve_dtype(None if dtype == "auto" else dtype, self.device)
        self.batch_size = batch_size
        self.image_size = image_size
        self.trust_remote_code = trust_remote_code

        processor_kwargs = {k: v for k, v in args.items() if HF_ARGS[k].target == "processor"}
        self.processor = _load_processor(self.source, trust_remote_code, processor_kwargs)
        self.tokenizer = self.processor.tokenizer
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.chat_template = _chat_template(self.processor, self.source)
        self._template_kwargs = template_kwargs(self.chat_template)
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
                trust_remote_code=trust_remote_code,
                dtype="auto" if dtype == "auto" else self.dtype,
                device_map=device_map,
                extra={**extra, **({"max_memory": limits} if limits else {})},
            )

        #: The summary's line on the attention kernel (CUDA only).
        self.model, default_attn, self.attention_note = load_with_attention(
            load, cuda=self.device.type == "cuda", given=args.get("attn_implementation")
        )
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

        base = self.source.spec if self.source.is_hub else self.source.path.name
        self.name = slug(base)
        ident = self.source.revision or f"sha256-{folder_hash(self.source.path)[:16]}"
        dtype_name = str(self.dtype).removeprefix("torch.")
        size = f":img{image_size}" if image_size else ""
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

    # ----------------------------------------------------------------------------- prompts
    def user_text(self, query: Query) -> str:
        """The model-independent user-turn text (``benchc.spec.format_question``)."""
        return format_question(query.question, query.options, query.hint)

    def render(self, user_text: str) -> str:
        """The chat-templated prompt for one image + ``user_text``, generation prompt added."""
        return self.render_messages(chat_messages(user_text), **self._template_kwargs)

    def render_messages(self, messages: list[dict], **template_kwargs: Any) -> str:
        """The chat-templated prompt of ``messages`` as given, with exactly ``template_kwargs``
        (generation prompt added). The reference server renders requests through this, as real
        servers do: parts in the order they arrive, nothing rearranged."""
        return render_chat(self.processor, messages, add_generation_prompt=True, **template_kwargs)

    def length_key(self, query: Query) -> tuple[int, ...]:
        """``(tokens,)``: the query's true input length, prompt text plus the image tokens the
        processor expands the image into (which depend on the image's shape for Qwen-VL-style
        grids). Equal keys batch without padding whatever the image shapes; close keys pad
        little. Text and image counts are each computed once (per prompt, per image shape)."""
        prompt = self._prompt(self.user_text(query))
        return (self._n_text_tokens(prompt) + self._n_image_tokens(query.image.shape[:2]),)

    def processor_ms(self, side: int = 448) -> float:
        """Milliseconds the processor takes for one ``side``-px photo-shaped image (4:3)."""
        import time

        image = np.zeros((side * 3 // 4, side, 3), np.uint8)
        prompt = self.render("?")
        self._model_inputs([image], [prompt], device=False)  # warm up
        began = time.perf_counter()
        self._model_inputs([image], [prompt], device=False)
        return (time.perf_counter() - began) * 1000

    def _n_text_tokens(self, prompt: str) -> int:
        n = self._text_tokens.get(prompt)
        if n is None:
            bos = self.tokenizer.bos_token
            add_special = not (bos and prompt.startswith(bos))
            with self._tokenizer_lock:
                ids = self.tokenizer(prompt, add_special_tokens=add_special)["input_ids"]
            n = self._text_tokens[prompt] = len(ids)
        return n

    def _n_image_tokens(self, shape: tuple[int, ...]) -> int:
        """Tokens one image of ``shape`` (H, W, before resizing) adds to a prompt."""
        if self._image_shape_matters is None:
            self._image_shape_matters = self._probe_image_shape_matters()
        memo = tuple(shape) if self._image_shape_matters else (0, 0)
        n = self._image_tokens.get(memo)
        if n is None:
            h, w = shape if self._image_shape_matters else (336, 336)
            size = self._pil(np.zeros((max(h, 1), max(w, 1), 3), np.uint8)).size[::-1]
            prompt = self.render("?")
            total = self._model_inputs([np.zeros((*size, 3), np.uint8)], [prompt], device=False)
            n = total["input_ids"].shape[1] - self._n_text_tokens(prompt)
            self._image_tokens[memo] = n
        return n

    def _probe_image_shape_matters(self) -> bool:
        """Whether the processor's input length depends on image shape (e.g. Qwen-VL grids)."""
        prompt = self.render("?")
        lengths = {
            self._model_inputs([np.zeros((h, w, 3), np.uint8)], [prompt], device=False)[
                "input_ids"
            ].shape[1]
            for h, w in ((224, 448), (448, 224), (336, 336))
        }
        return len(lengths) > 1

    # ----------------------------------------------------------------------------- scoring
    def forward(
        self,
        queries: Sequence[Query],
        *,
        distribution: bool = False,
        top_k: int | None = None,
        features: bool = False,
    ) -> BatchOutput:
        """Score a batch (:meth:`Backend.forward`); ``features`` also returns the pooled vision
        features of the images, taken from this pass's own tower run (:meth:`vision_features`
        without encoding the images again)."""
        return self.forward_prepared(
            self.prepare(queries), distribution=distribution, top_k=top_k, features=features
        )

    def prepare(self, queries: Sequence[Query]) -> PreparedBatch:
        """Everything of a batch that runs on the CPU: prompts, the processor, the dtype cast
        and (on CUDA) a non-blocking copy from pinned memory on a side stream. Thread-safe, so
        the suite builds batch k+1 while batch k runs (:mod:`benchc.models.pipeline`)."""
        if len(queries) == 0:
            raise ValueError("forward() needs at least one query")
        ks = [len(q.options) for q in queries]
        for i, (q, k) in enumerate(zip(queries, ks, strict=True)):
            require_letters(self.letters, k, what=_describe(q, i))
        batch = PreparedBatch(
            images=[q.image for q in queries],
            prompts=[self._prompt(self.user_text(q)) for q in queries],
            names=[_describe(q, i) for i, q in enumerate(queries)],
            ks=ks,
        )
        if self.max_rows is None or len(queries) <= self.max_rows:
            if self._processor_pool is not None:
                cpu = self._processor_pool.submit(
                    batch.images, batch.prompts, self._add_special(batch.prompts), _TRAINING_KEYS
                ).result()
            else:
                cpu = self._model_inputs(batch.images, batch.prompts, device=False)
            batch.inputs, batch.ready = self._device_inputs(cpu)
        return batch

    @property
    def processor_workers(self) -> int:
        """Processes running the processor for :meth:`prepare` (0: in the calling thread)."""
        return self._processor_pool.workers if self._processor_pool is not None else 0

    def use_processor_workers(self, workers: int) -> None:
        """Run the processor of :meth:`prepare` in ``workers`` processes (0: in-thread), for
        processors that tile images (Idefics3, SmolVLM: ~200 ms per image)."""
        if self._processor_pool is not None:
            self._processor_pool.close()
            self._processor_pool = None
        if workers > 0:
            from benchc.models.workers import ProcessorPool

            self._processor_pool = ProcessorPool(
                self.processor, self.image_size, workers, dtype=self.dtype
            )

    def close(self) -> None:
        """Stop the processor's worker processes, if any."""
        self.use_processor_workers(0)

    def _add_special(self, prompts: Sequence[str]) -> bool:
        bos = self.tokenizer.bos_token
        return not (bos and prompts[0].startswith(bos))

    def forward_prepared(
        self,
        batch: PreparedBatch,
        *,
        distribution: bool = False,
        top_k: int | None = None,
        features: bool = False,
    ) -> BatchOutput:
        """Run a batch from :meth:`prepare`. The device is waited on once, where the results are
        read (the finiteness check travels with them instead of syncing on its own)."""
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        logprobs, bad, pooled = self._logprobs(batch, features=features)
        option_logits = _option_logits(logprobs, self.letters, batch.ks)
        _raise_if_bad(self.name, bad, batch.names)
        option_mass = np.nansum(np.exp(option_logits.astype(np.float64)), axis=1).astype(np.float32)
        out: dict[str, Any] = {"option_logits": option_logits, "option_mass": option_mass}
        if top_k is not None:
            values, ids = torch.topk(logprobs, min(top_k, logprobs.shape[1]), dim=-1)
            out["top_ids"] = ids.to(torch.int64).cpu().numpy()
            out["top_logprobs"] = values.cpu().numpy()
        if distribution:
            out["logprobs"] = logprobs.cpu().numpy()
        if features:
            out["features"] = (
                pooled.cpu().numpy().astype(np.float32)
                if pooled is not None
                else self.vision_features(batch.images)
            )
        return BatchOutput(**out)

    def prompt_logprobs(
        self,
        images: Sequence[np.ndarray],
        prompts: Sequence[str],
        *,
        names: Sequence[str] | None = None,
    ) -> torch.Tensor:
        """float32 (B, V) next-token log-distribution after each rendered ``prompt`` (the
        benchc prompt of :meth:`render`, or a server request's :meth:`render_messages`).

        Splits the batch in halves on CUDA out-of-memory (remembering the size that fit) and
        raises ``ValueError`` naming the sample when a row has NaN or infinite logits.
        """
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        names = list(names) if names is not None else [f"batch row {i}" for i in range(len(images))]
        batch = PreparedBatch(images=list(images), prompts=list(prompts), names=names, ks=[])
        logprobs, bad, _ = self._logprobs(batch)
        _raise_if_bad(self.name, bad.cpu(), names)
        return logprobs

    def _logprobs(
        self, batch: PreparedBatch, *, features: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """(B, V) log-softmax and the (B,) rows with non-finite logits, both left on the device,
        and (``features``) the (B, D) pooled vision features of this pass's tower run.

        On CUDA out-of-memory the batch is split in halves (the size that fit is kept in
        :attr:`max_rows`). The retry runs outside the ``except`` block, after the failed
        attempt's inputs and its traceback (which holds the model's activations) are released:
        a retry beside them would cascade into further halvings or a second OOM."""
        n = len(batch.images)
        limit = self.max_rows or n
        if n > limit:
            batch.inputs = batch.ready = None  # the parts are built at their own size
            parts = [_sub_batch(batch, i, i + limit) for i in range(0, n, limit)]
            out = [self._logprobs(p, features=features) for p in parts]
            pooled = torch.cat([o[2] for o in out]) if features else None
            return torch.cat([o[0] for o in out]), torch.cat([o[1] for o in out]), pooled
        inputs, ready = batch.inputs, batch.ready
        batch.inputs = batch.ready = None  # the batch does not keep them past this pass
        if inputs is None:
            inputs, ready = self._device_inputs(
                self._model_inputs(batch.images, batch.prompts, device=False)
            )
        failed = False
        try:
            logits, pooled = self._last_logits(inputs, ready, features=features, n=n)
        except torch.OutOfMemoryError:
            if n == 1:
                raise
            failed = True
        if failed:  # outside the except: the exception and its frames are gone
            del inputs, ready
            half = n // 2
            self.max_rows = half
            log.warning("CUDA OOM at batch %d; retrying in batches of %d", n, half)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            return self._logprobs(batch, features=features)
        self.largest_batch = max(self.largest_batch, n)
        bad = (~torch.isfinite(logits)).any(dim=-1)
        return torch.log_softmax(logits, dim=-1), bad, pooled

    def _last_logits(
        self, inputs: dict, ready: Any = None, *, features: bool = False, n: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """One forward pass; float32 (B, V) logits of the last position, and (``features``) the
        (n, D) pooled output of the tower as this pass ran it."""
        if ready is not None:  # inputs copied on the side stream: wait for them on this one
            stream = torch.cuda.current_stream(self._input_device)
            stream.wait_event(ready[0])
            for v in inputs.values():
                v.record_stream(stream)
        with torch.inference_mode():
            if not features:
                out = self.model(**inputs, **self._keep_kwargs, use_cache=False)
                return out.logits[:, -1, :].float(), None
            with TowerOutput(self.model) as seen:
                out = self.model(**inputs, **self._keep_kwargs, use_cache=False)
            pooled = None
            if seen.ran():  # else (a pass without the tower) the images are encoded on their own
                try:
                    pooled = pool_tower_output(seen.tower, seen.output(), inputs, n)
                except ValueError:  # crops per image not among the inputs (InternVL): the same
                    pass
        return out.logits[:, -1, :].float(), pooled

    def _model_inputs(
        self, images: Sequence[np.ndarray], prompts: Sequence[str], *, device: bool = True
    ) -> dict:
        """The processor's tensors for one batch (on the input device unless ``device=False``:
        then on the CPU, as the processor made them)."""
        pil = [[self._pil(img)] for img in images]
        add_special = self._add_special(prompts)

        def whole() -> dict:
            # A fast tokenizer is not safe across threads while its padding is set ("Already
            # borrowed"): the pipeline's planning and preparing threads take turns.
            # A processor may add training targets (PaliGemma: ``labels``); with them the model
            # computes a loss over the kept logits only, which fails. Scoring never needs them.
            with self._tokenizer_lock:
                return process_batch(self.processor, pil, prompts, add_special, _TRAINING_KEYS)

        def image_part() -> dict:
            return dict(self.processor.image_processor(images=pil, return_tensors="pt"))

        # Each sample's text tensors are made once per run (models/text_side.py).
        text_side = self._text_side()
        keys = [(p, im[0].height, im[0].width) for p, im in zip(prompts, pil, strict=True)]
        inputs = text_side.compose(keys, image_part, whole)
        if inputs is None:
            inputs = whole()
            text_side.record(keys, inputs)
        return self._device_inputs(inputs)[0] if device else inputs

    def _text_side(self) -> TextSide:
        """The per-sample text tensors of the current processor (a new processor, a new one)."""
        held = self._text_sides
        if held is not None and held[0] is self.processor:
            return held[1]
        side = TextSide(self.tokenizer.pad_token_id, self.tokenizer.padding_side)
        image_processor = getattr(self.processor, "image_processor", None)
        if image_processor is None:
            side.enabled = False
        else:
            probe = [[Image.new("RGB", (self.image_size or 64, self.image_size or 64))]]
            try:
                side.image_keys = frozenset(image_processor(images=probe, return_tensors="pt"))
            except Exception as err:  # composing is an optimisation: the processor still runs
                log.info("per-sample text tensors off: image processor alone fails (%s)", err)
                side.enabled = False
        self._text_sides = (self.processor, side)
        return side

    def _device_inputs(self, inputs: Mapping[str, torch.Tensor]) -> tuple[dict, Any]:
        """``inputs`` on the input device, floating point ones in the model's dtype; on CUDA cast
        on the CPU into pinned memory and copied without blocking on a side stream (returns
        the event the model's stream waits for), else as a plain ``.to``."""
        if self._input_device.type != "cuda":
            out = {
                k: (
                    v.to(self._input_device, dtype=self.dtype)
                    if torch.is_floating_point(v)
                    else v.to(self._input_device)
                )
                for k, v in inputs.items()
            }
            return out, None
        if self._copy_stream is None:
            self._copy_stream = torch.cuda.Stream(self._input_device)
        host = {
            k: (v.to(self.dtype) if torch.is_floating_point(v) else v).pin_memory()
            for k, v in inputs.items()
        }
        with torch.cuda.stream(self._copy_stream):
            out = {k: v.to(self._input_device, non_blocking=True) for k, v in host.items()}
            event = torch.cuda.Event()
            event.record(self._copy_stream)
        return out, (event, host)  # the pinned buffers live until the copy is waited on

    def _prompt(self, user_text: str) -> str:
        """:meth:`render`, once per distinct user text (the same prompts recur in every
        condition of a run)."""
        prompt = self._prompts.get(user_text)
        if prompt is None:
            prompt = self._prompts[user_text] = self.render(user_text)
        return prompt

    def _pil(self, image: np.ndarray) -> Image.Image:
        if self.image_size is not None and is_prepared(image, self.image_size):
            return Image.fromarray(image)  # the suite's images: skip two copies
        return Image.fromarray(prepare(image, self.image_size))

    # ----------------------------------------------------------------------------- vision
    def vision_features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """float32 (B, D): mean of the vision tower's final-layer patch tokens (CLS dropped)."""
        if len(images) == 0:
            raise ValueError("vision_features() needs at least one image")
        parts = []
        for i in range(0, len(images), self.batch_size):
            chunk = [[self._pil(img)] for img in images[i : i + self.batch_size]]
            image_inputs = self.processor.image_processor(images=chunk, return_tensors="pt")
            image_inputs = {
                k: (
                    v.to(self._input_device, dtype=self.dtype)
                    if torch.is_floating_point(v)
                    else v.to(self._input_device)
                )
                for k, v in image_inputs.items()
                if isinstance(v, torch.Tensor)
            }
            with torch.inference_mode():
                feats = pooled_vision_features(self.model, image_inputs, len(chunk))
            parts.append(feats.float().cpu().numpy())
        return np.concatenate(parts).astype(np.float32)


def _has_tower(model: torch.nn.Module) -> bool:
    try:
        find_vision_tower(model)
    except ValueError:
        return False
    return True


def _describe(query: Query, row: int) -> str:
    return f"sample {query.id!r} (batch row {row})" if query.id is not None else f"batch row {row}"


def _option_logits(logprobs: torch.Tensor, letters: dict, ks: Sequence[int]) -> np.ndarray:
    """float32 (B, K_max) letter log-probabilities, NaN beyond each row's K."""
    k_max = max(ks)
    cols = []
    for j in range(k_max):
        ids = torch.tensor(letters[LETTERS[j]] or (0,), device=logprobs.device)
        cols.append(torch.logsumexp(logprobs[:, ids], dim=-1))
    out = torch.stack(cols, dim=1).cpu().numpy().astype(np.float32)
    out[np.arange(k_max)[None, :] >= np.asarray(ks)[:, None]] = np.nan
    return out


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
