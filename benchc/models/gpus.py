"""CUDA defaults of the Hugging Face backend: the attention kernel, and which GPUs a model
spread with ``device_map`` may use when pytest-xdist runs several workers.

Why: under sdpa, Qwen-VL's vision tower runs its window attention as 5,776 small kernels per
16-image forward (flash attention: 32); and ``device_map=auto`` in every xdist worker hands each
worker all visible GPUs, so N workers load N copies spread over the same GPUs.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any

#: The attention implementation benchc prefers on CUDA when the package is importable.
FLASH = "flash_attention_2"
#: The fallback (transformers' default on CUDA).
SDPA = "sdpa"


def flash_available() -> bool:
    """Whether the ``flash_attn`` package is importable (its kernels need a CUDA GPU)."""
    return importlib.util.find_spec("flash_attn") is not None


def default_attention() -> tuple[str, str]:
    """The attention implementation to try first on CUDA, and the summary's line about it."""
    if flash_available():
        return FLASH, f"attention {FLASH} (benchc's default on CUDA)"
    return SDPA, (
        f"attention {SDPA}: flash_attn is not installed (pip install flash-attn); "
        "vision towers with window attention run much slower under sdpa"
    )


def xdist_workers() -> tuple[int | None, int]:
    """This process's xdist worker index and the worker count (None, 0 outside xdist), from
    the environment pytest-xdist sets in each worker."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not name.startswith("gw") or not name[2:].isdigit() or not count.isdigit():
        return None, 0
    return int(name[2:]), int(count)


def gpu_share(worker: int, workers: int, gpus: int, *, what: str = "device_map=auto") -> list[int]:
    """The GPUs worker ``worker`` of ``workers`` may spread its model over: ``gpus / workers``
    consecutive ones. Refused, with the fix, when the GPUs do not divide among the workers."""
    if workers < 1 or gpus < 1:
        raise ValueError(f"{what}: needs at least one worker and one GPU")
    if workers > gpus or gpus % workers:
        fits = [n for n in range(1, gpus + 1) if gpus % n == 0]
        raise ValueError(
            f"{what} under pytest-xdist -n {workers} with {gpus} visible GPU(s): each worker "
            f"loads its own copy of the model, spread over its own share of the GPUs, so -n must "
            f"divide the GPU count (-n {' / -n '.join(map(str, fits))}); a model that fits one "
            f"GPU needs no device_map: run -n {gpus} without it (one model per GPU)"
        )
    per = gpus // workers
    return list(range(worker * per, (worker + 1) * per))


def max_memory(share: list[int], total_bytes: list[int], fraction: float = 0.9) -> dict:
    """``from_pretrained``'s ``max_memory`` restricting accelerate's ``device_map`` to the GPUs
    of ``share`` (a GPU absent from it gets none of the model)."""
    return {i: int(total_bytes[i] * fraction) for i in share}


#: ``device_map`` values that spread one model over several GPUs.
SPREAD_MAPS = ("auto", "balanced", "balanced_low_0", "sequential")


def worker_gpus(device_map: str | None) -> tuple[list[int] | None, dict | None]:
    """Under pytest-xdist, the GPUs this worker may spread a ``device_map`` model over and the
    ``max_memory`` that confines accelerate to them; ``(None, None)`` otherwise. Raises
    ``ValueError`` with the fix when the GPUs do not divide among the workers."""
    if device_map not in SPREAD_MAPS:
        return None, None
    worker, workers = xdist_workers()
    if worker is None or workers < 2:
        return None, None
    import torch

    n_gpus = torch.cuda.device_count()
    share = gpu_share(worker, workers, n_gpus, what=f"device_map={device_map}")
    totals = [torch.cuda.get_device_properties(i).total_memory for i in range(n_gpus)]
    return share, max_memory(share, totals)


def load_with_attention(
    load: Callable[[str | None], Any], *, cuda: bool, given: str | None
) -> tuple[Any, str | None, str]:
    """``load(attn_implementation)`` with benchc's CUDA default when none is ``given``: flash
    attention when importable, sdpa when not or when the model refuses it. Returns the model,
    the default chosen (None when given or off CUDA) and the summary's line about it."""
    if given is not None or not cuda:
        return load(given), None, ""
    choice, note = default_attention()
    try:
        return load(choice), choice, note
    except (ValueError, ImportError) as err:
        if choice != FLASH or "flash" not in str(err).lower():
            raise
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
    note = f"attention {SDPA}: the model does not support {FLASH} ({first})"
    return load(SDPA), SDPA, note
