"""Batch generation: many images x many conditions, through the cache and a reusable process pool.

The library's random corruptions use numpy's global RNG, so parallelism is by processes, never
threads. Pools are kept alive between calls (per worker count) because a fresh worker pays
~1 s of imports (skimage, cv2, numba) before its first image; call :func:`shutdown_pools` to free
them (also done at interpreter exit).
"""

from __future__ import annotations

import atexit
import math
import multiprocessing as mp
import os
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
from PIL import Image

from benchc.data.images import prepare
from benchc.spec import parse_condition

from .cache import CacheKey, CorruptionCache
from .engine import content_hash, corrupt_array

#: Images to materialise: ``(sample_id, PIL image or array)``.
ImageItem = tuple[str, Image.Image | np.ndarray]

# At most this many conditions per pool task: the 95 conditions of one sample become 4 tasks,
# small enough to balance 2-8 workers, large enough to amortise pickling the image.
_MAX_TASK_CONDITIONS = 24

_POOLS: dict[int, ProcessPoolExecutor] = {}


def _init_worker() -> None:
    """Single-threaded numerics in every worker (the pool is the parallelism), libraries loaded."""
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    import cv2

    cv2.setNumThreads(1)
    from .engine import _library

    _library()


def _pool(workers: int) -> ProcessPoolExecutor:
    pool = _POOLS.get(workers)
    if pool is None:
        # forkserver/spawn, never fork: the parent may hold torch or OpenMP threads.
        method = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
        ctx = mp.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["benchc.corruptions.batch"])
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker)
        _POOLS[workers] = pool
    return pool


def shutdown_pools() -> None:
    """Stop every kept-alive worker pool."""
    while _POOLS:
        _, pool = _POOLS.popitem()
        pool.shutdown(wait=True, cancel_futures=True)


atexit.register(shutdown_pools)


def _compute(
    sample_id: str,
    array: np.ndarray,
    jobs: list[tuple[str, str, int, CacheKey | None]],
    seed: int,
    cache: CorruptionCache | None,
) -> list[tuple[str, np.ndarray]]:
    """Corrupt one prepared image under several conditions, storing each result in the cache."""
    out = []
    for condition, name, severity, key in jobs:
        try:
            result = corrupt_array(array, name, severity, seed=seed, sample_id=sample_id)
        except Exception as exc:
            raise RuntimeError(f"sample {sample_id!r}, condition {condition}: {exc}") from exc
        if cache is not None and key is not None:
            cache.put(key, result)
        out.append((condition, result))
    return out


def _parse_conditions(conditions: Sequence[str]) -> list[tuple[str, str | None, int | None]]:
    if isinstance(conditions, str):
        raise ValueError(
            f"conditions must be a sequence of condition keys, not the string {conditions!r}"
        )
    seen, parsed = set(), []
    for key in conditions:
        if key in seen:
            continue
        seen.add(key)
        name, severity = parse_condition(key)
        parsed.append((key, name, severity))
    return parsed


def iter_materialize(
    images: Sequence[ImageItem],
    conditions: Sequence[str],
    *,
    image_size: int | None,
    seed: int,
    cache: CorruptionCache | None = None,
    workers: int = 1,
    progress: bool = False,
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Yield ``(sample_id, {condition: (H, W, 3) uint8 array})`` per image, in input order.

    Streaming keeps memory bounded (a few hundred samples x 95 conditions do not fit at once);
    the pool works ahead of the consumer by a bounded number of tasks. Conditions keep their
    given order (duplicates dropped); ``"clean"`` maps to the prepared image itself.
    """
    from tqdm.auto import tqdm

    parsed = _parse_conditions(conditions)
    ids = [sid for sid, _ in images]
    if len(set(ids)) != len(ids):
        dup = next(s for s in ids if ids.count(s) > 1)
        raise ValueError(f"duplicate sample id {dup!r} in images")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer; got {workers!r}")
    pool = _pool(workers) if workers > 1 else None
    window = max(8, 4 * workers)
    bar = tqdm(
        total=len(images) * len(parsed), desc="corruptions", unit="img", disable=not progress
    )

    pending: deque[tuple[str, dict[str, np.ndarray], list[Future]]] = deque()
    in_flight = 0

    def drain(block_until: int) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
        nonlocal in_flight
        while pending and (in_flight > block_until or all(f.done() for f in pending[0][2])):
            sid, got, futures = pending.popleft()
            for f in futures:
                results = f.result()
                got.update(results)
                bar.update(len(results))
                in_flight -= 1
            yield sid, {key: got[key] for key, _, _ in parsed}

    try:
        for sample_id, image in images:
            array = prepare(image, image_size, what=f"sample {sample_id!r}")
            got: dict[str, np.ndarray] = {}
            jobs = []
            content = content_hash(array) if cache is not None else ""
            for key, name, severity in parsed:
                if name is None:
                    got[key] = array
                    continue
                ckey = None
                if cache is not None:
                    ckey = CacheKey(content, image_size, name, severity, seed, str(sample_id))
                    hit = cache.get(ckey, array.shape)
                    if hit is not None:
                        got[key] = hit
                        continue
                jobs.append((key, name, severity, ckey))
            bar.update(len(got))
            if pool is None:
                for condition, result in _compute(sample_id, array, jobs, seed, cache):
                    got[condition] = result
                bar.update(len(jobs))
                yield sample_id, {key: got[key] for key, _, _ in parsed}
                continue
            n_tasks = math.ceil(len(jobs) / _MAX_TASK_CONDITIONS)
            futures = [
                pool.submit(_compute, sample_id, array, jobs[i::n_tasks], seed, cache)
                for i in range(n_tasks)
            ]
            in_flight += len(futures)
            pending.append((sample_id, got, futures))
            yield from drain(block_until=window)
        yield from drain(block_until=-1)
    except BrokenProcessPool:
        _POOLS.pop(workers, None)  # a worker died; the next call starts a fresh pool
        raise
    finally:
        for _, _, futures in pending:
            for f in futures:
                f.cancel()
        bar.close()


def materialize(
    images: Sequence[ImageItem],
    conditions: Sequence[str],
    *,
    image_size: int | None,
    seed: int,
    cache: CorruptionCache | None = None,
    workers: int = 1,
    progress: bool = False,
) -> dict[tuple[str, str], np.ndarray]:
    """All ``(sample_id, condition) -> (H, W, 3) uint8`` arrays, ordered sample-major.

    ``conditions`` are :func:`benchc.spec.condition_key` strings; ``"clean"`` gives the prepared
    image. ``workers > 1`` uses a kept-alive process pool; results are bit-identical for any
    worker count. Cache hits are read in this process, misses are computed and stored.
    """
    out: dict[tuple[str, str], np.ndarray] = {}
    for sample_id, by_condition in iter_materialize(
        images,
        conditions,
        image_size=image_size,
        seed=seed,
        cache=cache,
        workers=workers,
        progress=progress,
    ):
        for condition, array in by_condition.items():
            out[(sample_id, condition)] = array
    return out
