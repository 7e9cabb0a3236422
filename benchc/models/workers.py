"""A checkpoint's processor run in worker processes, for processors too heavy for one thread.

Idefics3 and SmolVLM split every image into tiles: 177-218 ms per image on one core, so one
thread feeds a GPU that scores 45 queries/s at most 5 queries/s. Their image code holds the GIL
for much of that, so threads do not help; processes do. Tensors come back through shared
memory (torch's multiprocessing reductions), not through the pipe, already cast to the
model's dtype (the cast is the same in any process: half the bytes cross, and the main process,
whose one core also drives the device, does not spend ~5 ms a query casting 30 MB of tiles).
The outputs are those of the processor and cast in this process, bit for bit.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

import numpy as np

_PROCESSOR: Any = None
_IMAGE_SIZE: int | None = None
_DTYPE: Any = None


def _init(processor: bytes, image_size: int | None, dtype: Any = None) -> None:
    import torch

    global _PROCESSOR, _IMAGE_SIZE, _DTYPE
    torch.set_num_threads(1)  # one core per worker: the workers are the parallelism
    _PROCESSOR = pickle.loads(processor)
    _IMAGE_SIZE = image_size
    _DTYPE = dtype


def _run(
    images: Sequence[np.ndarray], prompts: Sequence[str], add_special: bool, drop: frozenset
) -> dict:
    from PIL import Image

    from benchc.data.images import prepare
    from benchc.models.processors import process_batch

    pil = [[Image.fromarray(prepare(image, _IMAGE_SIZE))] for image in images]
    out = process_batch(_PROCESSOR, pil, list(prompts), add_special, drop)
    if _DTYPE is None:
        return out
    import torch

    cast = {k: v.to(_DTYPE) for k, v in out.items() if torch.is_tensor(v) and v.is_floating_point()}
    return {**out, **cast}


class ProcessorPool:
    """``workers`` processes, each with its own copy of ``processor`` (spawned: safe beside
    threads and CUDA)."""

    def __init__(
        self, processor: Any, image_size: int | None, workers: int, dtype: Any = None
    ) -> None:
        """``dtype``: the floating-point dtype the tensors come back in (None: as made)."""
        import torch.multiprocessing  # noqa: F401  (registers the shared-memory reductions)

        self.workers = workers
        self._pool = ProcessPoolExecutor(
            workers,
            mp_context=mp.get_context("spawn"),
            initializer=_init,
            initargs=(pickle.dumps(processor), image_size, dtype),
        )

    def submit(
        self,
        images: Sequence[np.ndarray],
        prompts: Sequence[str],
        add_special: bool,
        drop: frozenset = frozenset(),
    ) -> Future:
        """The processor's tensors for one batch, as a future."""
        return self._pool.submit(_run, list(images), list(prompts), add_special, drop)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def default_workers(ms_per_image: float, device_type: str) -> int:
    """Processor processes for a model on ``device_type``: none beside a CPU model (its cores
    are busy) or for a light processor (under 20 ms per image a thread keeps up); else all
    cores but one, at most 8."""
    if device_type == "cpu" or ms_per_image < 20:
        return 0
    return max(0, min(8, (os.cpu_count() or 1) - 1))
