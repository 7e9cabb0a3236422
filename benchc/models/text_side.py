"""The processor's text tensors, made once per sample: a batch then runs only the image processor.

A multimodal processor expands each prompt's image placeholder into the image's tokens and
tokenizes the result for every batch, though a sample's prompt and image shape -- and so its
tokens -- are the same in all ~96 conditions of a run (Qwen2.5-VL: 2.4 of its 8 ms per query,
docs/guides/gpu.md). :class:`TextSide` keeps each row's unpadded text tensors (``input_ids``,
``attention_mask``, ``mm_token_type_ids``, ...) from the batches the whole processor made, keyed by
(prompt, image shape), and pads them into the next batches beside the image processor's output.

Never trusted blindly: the first batch composed this way, and the first one that needs padding,
are compared with the whole processor's output tensor by tensor; a difference (a processor whose
text depends on more than the prompt and the image's shape, or pads otherwise) switches composing
off for the backend, with a log line, and every batch runs the whole processor as before. So the
tensors the model sees are the processor's, bit for bit, either way.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import torch

log = logging.getLogger(__name__)

#: (rendered prompt, image height, image width): what a row's text tensors depend on.
RowKey = tuple[str, int, int]

#: Bytes of kept rows (least recently used dropped first): ~7 kB a row for Qwen2.5-VL at 448 px,
#: so a 10k-sample dataset keeps all of its rows; a server's stream of new prompts stays bounded.
BUDGET = 256 << 20


class TextSide:
    """Per-row text tensors of a processor, recorded from its outputs and padded back together.

    ``image_keys``: the keys the image processor alone returns; ``pad_id``/``side``: the
    tokenizer's padding. Thread-safe (the pipeline prepares batches in background threads).
    """

    def __init__(self, pad_id: int | None, side: str, budget: int = BUDGET) -> None:
        self.pad_id = pad_id
        self.side = side
        self.budget = budget
        self.bytes = 0
        self.enabled = pad_id is not None and side in ("left", "right")
        self.image_keys: frozenset[str] | None = None
        self._rows: OrderedDict[RowKey, dict[str, torch.Tensor]] = OrderedDict()
        self._checked_plain = False
        self._checked_padded = False
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    # -- recording -----------------------------------------------------------------------------
    def record(self, keys: Sequence[RowKey], full: dict[str, Any]) -> None:
        """Keep each row's unpadded text tensors from the whole processor's output ``full``."""
        if not self.enabled or self.image_keys is None:
            return
        text = self._text_keys(full)
        if text is None:
            return
        mask = full["attention_mask"].bool()
        with self._lock:
            for row, key in enumerate(keys):
                if key not in self._rows:
                    kept = {k: full[k][row][mask[row]].clone() for k in text}
                    self._rows[key] = kept
                    self.bytes += sum(v.nbytes for v in kept.values())
            while self.bytes > self.budget and len(self._rows) > 1:  # a server's endless prompts
                _, old = self._rows.popitem(last=False)
                self.bytes -= sum(v.nbytes for v in old.values())

    def _text_keys(self, full: dict[str, Any]) -> list[str] | None:
        """The text-side keys of ``full``, or None (composing switched off) when they are not
        all (B, L) tensors beside ``input_ids`` and ``attention_mask``."""
        text = [k for k in full if k not in self.image_keys]
        ids = full.get("input_ids")
        ok = (
            isinstance(ids, torch.Tensor)
            and ids.ndim == 2
            and "attention_mask" in text
            and all(isinstance(full[k], torch.Tensor) and full[k].shape == ids.shape for k in text)
        )
        if not ok:
            self._switch_off(f"text outputs {sorted(text)} are not all (batch, length) tensors")
            return None
        return text

    # -- composing -----------------------------------------------------------------------------
    def compose(
        self,
        keys: Sequence[RowKey],
        images: Callable[[], dict[str, Any]],
        full: Callable[[], dict[str, Any]],
    ) -> dict[str, Any] | None:
        """The batch's inputs from the kept text tensors and ``images()`` (the image processor's
        output), or None when a row's text is not kept yet (the caller runs the whole processor
        and records it). ``full()`` runs the whole processor for the checks."""
        if not self.enabled or self.image_keys is None:
            return None
        with self._lock:
            rows = [self._rows.get(k) for k in keys]
            for k, r in zip(keys, rows, strict=True):
                if r is not None:
                    self._rows.move_to_end(k)
        if any(r is None for r in rows):
            return None
        lengths = {len(r["input_ids"]) for r in rows}
        padded = len(lengths) > 1
        out = {**self._pad(rows), **images()}
        if not (self._checked_padded if padded else self._checked_plain):
            reference = full()
            same = set(reference) == set(out) and all(
                _same(reference[k], out[k]) for k in reference
            )
            if not same:
                self._switch_off("the composed inputs differ from the processor's")
                return reference
            with self._lock:
                if padded:
                    self._checked_padded = True
                self._checked_plain = True
        return out

    def _pad(self, rows: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        width = max(len(r["input_ids"]) for r in rows)
        out = {}
        for key in rows[0]:
            fill = self.pad_id if key == "input_ids" else 0
            first = rows[0][key]
            batch = torch.full((len(rows), width), fill, dtype=first.dtype)
            for i, r in enumerate(rows):
                n = len(r[key])
                if self.side == "left":
                    batch[i, width - n :] = r[key]
                else:
                    batch[i, :n] = r[key]
            out[key] = batch
        return out

    def _switch_off(self, why: str) -> None:
        if self.enabled:
            log.info("per-sample text tensors off, the whole processor runs per batch: %s", why)
        self.enabled = False
        with self._lock:
            self._rows.clear()
            self.bytes = 0


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    return type(a) is type(b) and a == b
