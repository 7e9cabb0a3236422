"""The Hugging Face backend (:mod:`benchc.models.hf`), batching and forward: a batch prepared
on the CPU (the processor, the dtype cast, a pinned copy on CUDA), one forward pass reading the
answer position's logits (halved on CUDA out-of-memory), and the vision tower's pooled
features."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from benchc.models.base import BatchOutput, Query
from benchc.models.hf_logits import _option_logits
from benchc.models.hf_prompt import _TRAINING_KEYS
from benchc.models.letters import require_letters
from benchc.models.vision import TowerOutput, pool_tower_output, pooled_vision_features

log = logging.getLogger("benchc.models.hf")


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


def _describe(query: Query, row: int) -> str:
    return f"sample {query.id!r} (batch row {row})" if query.id is not None else f"batch row {row}"


class HFBatch:
    """:class:`~benchc.models.hf.HFBackend`'s batches and forward passes (a mixin: the backend
    holds the model, its input device and dtype, the letters and the processor pool)."""

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
