"""``--benchc-degrade``: a model washed out or made over-confident, known worse without training.

:class:`DegradedBackend` (``damp``: image contrast kept; ``sharpen``: next-token logits scaled)
wraps whatever ``--model`` selects; the suite's own tests and the docs' example report use
the hidden ``--benchc-degrade damp=0.3,sharpen=3``, found through the registry (the entry
point ``degrade`` of ``benchc.wrappers``, :mod:`benchc.registry`). It ships because the plugin
selects it;
the rest of the mutant zoo (:mod:`benchc.testing.dev.zoo`) is checkout-only test tooling.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from benchc.models.base import Backend, BatchOutput, Query

KNOBS: tuple[str, ...] = ("damp", "sharpen")


def damp_image(image: np.ndarray, keep: float) -> np.ndarray:
    """Blend an RGB uint8 image toward its per-channel mean, keeping ``keep`` of the contrast."""
    arr = image.astype(np.float32)
    mean = arr.mean(axis=(0, 1), keepdims=True)
    return np.clip(np.rint(mean + (arr - mean) * np.float32(keep)), 0, 255).astype(np.uint8)


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = np.max(x, axis=-1, keepdims=True)
    return (x - m - np.log(np.sum(np.exp(x - m), axis=-1, keepdims=True))).astype(np.float32)


class DegradedBackend(Backend):
    """``inner`` with damped image contrast and/or sharpened next-token logits; the ``degrade``
    entry point of ``benchc.wrappers`` (the suite looks it up by name)."""

    KNOBS = KNOBS

    def __init__(self, inner: Backend, *, damp: float = 1.0, sharpen: float = 1.0) -> None:
        if not 0.0 <= damp <= 1.0:
            raise ValueError(f"damp must be in [0, 1], got {damp}")
        if sharpen <= 0:
            raise ValueError(f"sharpen must be > 0, got {sharpen}")
        self.inner, self.damp, self.sharpen = inner, float(damp), float(sharpen)
        self.name = inner.name
        self.batch_size = inner.batch_size
        self.fingerprint = f"{inner.fingerprint}+degraded(damp={damp:g},sharpen={sharpen:g})"

    def _images(self, images: Sequence[np.ndarray]) -> list[np.ndarray]:
        if self.damp == 1.0:
            return list(images)
        return [damp_image(im, self.damp) for im in images]

    def length_key(self, query: Query) -> tuple[int, ...]:
        return self.inner.length_key(query)

    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        damped = [
            replace(q, image=im)
            for q, im in zip(queries, self._images([q.image for q in queries]), strict=True)
        ]
        if self.sharpen == 1.0:
            return self.inner.forward(damped, distribution=distribution, top_k=top_k)
        out = self.inner.forward(damped, distribution=True, top_k=None)
        scaled = out.logprobs.astype(np.float64) * self.sharpen
        logprobs = _log_softmax(scaled)
        log_z = (scaled - logprobs)[:, :1]  # the per-row normaliser, the same in every column
        # Option logits are letter log-probabilities; rescale them the same way (exact for a
        # letter with one token variant), so both distributions sharpen together.
        option_logits = (out.option_logits.astype(np.float64) * self.sharpen - log_z).astype(
            np.float32
        )
        mass = np.nansum(np.exp(option_logits.astype(np.float64)), axis=1).astype(np.float32)
        fields = {"option_logits": option_logits, "option_mass": mass}
        if distribution:
            fields["logprobs"] = logprobs
        if top_k is not None:
            idx = np.argsort(-logprobs, axis=1, kind="stable")[:, :top_k]
            fields["top_ids"] = idx.astype(np.int64)
            fields["top_logprobs"] = np.take_along_axis(logprobs, idx, axis=1)
        return BatchOutput(**fields)

    def vision_features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        return self.inner.vision_features(self._images(images))

    @property
    def white_box(self) -> bool:
        return self.inner.white_box

    @property
    def capabilities(self):  # type: ignore[override]
        return self.inner.capabilities

    @property
    def local_cpu(self) -> bool:
        return self.inner.local_cpu

    def notes(self) -> list[str]:
        return self.inner.notes()
