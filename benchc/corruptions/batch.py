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
import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial

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


#: How often a worker checks that the process which created its pool is still alive.
WATCHDOG_S = 0.5


def _proc_start(pid: int) -> int | None:
    from benchc.results.lock import process_start

    return process_start(pid)


def _watch_parent(pid: int, start: int | None) -> None:
    """Exit this worker as soon as process ``pid`` (started at ``start``) is gone.

    Workers hang on their task queue forever when the parent is SIGKILLed or OOM-killed (each
    worker holds both ends of the queue's pipe), and they keep the forkserver and the resource
    tracker alive through inherited pipes; once the workers exit, both see EOF and exit too.
    """
    import threading
    import time

    from benchc.results.lock import pid_alive

    def watch() -> None:
        while True:
            time.sleep(WATCHDOG_S)
            if not pid_alive(pid) or (start is not None and _proc_start(pid) not in (None, start)):
                os._exit(1)

    threading.Thread(target=watch, name="benchc-parent-watchdog", daemon=True).start()
    if os.getppid() != pid:  # a forkserver child: its parent is single-threaded, so the
        _die_with_parent()  # death signal cannot fire early (a spawn parent's thread may end)


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent (the forkserver) dies; elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - no prctl: the watchdog remains
        pass


def _init_worker(parent_pid: int | None = None, parent_start: int | None = None) -> None:
    """Single-threaded numerics in every worker (the pool is the parallelism), libraries loaded,
    and a watchdog that ends the worker with the process that owns the pool."""
    if parent_pid is not None:
        _watch_parent(parent_pid, parent_start)
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
        owner = os.getpid()
        pool = ProcessPoolExecutor(
            max_workers=workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(owner, _proc_start(owner)),
        )
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
    keep: bool = True,
) -> list[tuple[str, np.ndarray]]:
    """Corrupt one prepared image under several conditions, storing each result in the cache.

    ``keep=False`` (cache filling) returns nothing, sparing the pickling back to the parent.
    """
    out = []
    for condition, name, severity, key in jobs:
        try:
            result = corrupt_array(array, name, severity, seed=seed, sample_id=sample_id)
        except Exception as exc:
            raise RuntimeError(f"sample {sample_id!r}, condition {condition}: {exc}") from exc
        if cache is not None and key is not None:
            cache.put(key, result)
        if keep:
            out.append((condition, result))
    return out


#: Threads that may prepare images and read cache hits ahead of the consumer (decoding,
#: resizing and hashing release the GIL). Worth it when the model runs elsewhere (a server, a
#: GPU); beside a model on these CPU cores the threads only compete with it, so callers ask.
READ_THREADS = max(1, min(4, os.cpu_count() or 1))


def _ordered(fn, items: Sequence, window: int, threads: int) -> Iterator:
    """``fn`` over ``items`` in ``threads`` threads, at most ``window`` ahead, yielded in input
    order (an error surfaces at its own item, as in a plain loop)."""
    if len(items) < 2 or threads < 2:
        yield from map(fn, items)
        return
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="benchc-cache-read") as readers:
        ahead: deque[Future] = deque()
        try:
            for item in items:
                ahead.append(readers.submit(fn, item))
                if len(ahead) > window:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()
        finally:
            for f in ahead:
                f.cancel()


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


def _check_images(images: Sequence[ImageItem], workers: int) -> None:
    ids = [sid for sid, _ in images]
    if len(set(ids)) != len(ids):
        dup = next(s for s in ids if ids.count(s) > 1)
        raise ValueError(f"duplicate sample id {dup!r} in images")
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer; got {workers!r}")


def _look_up(
    item: ImageItem,
    *,
    parsed: list[tuple[str, str | None, int | None]],
    image_size: int | None,
    seed: int,
    cache: CorruptionCache | None,
    keep: bool,
    files_only: bool = False,
) -> tuple[str, np.ndarray, dict, dict, list]:
    """Prepare one image and read its cache hits: the arrays, their PNG bytes, the rest.
    ``files_only``: a hit whose file checks without decoding is ``None`` in the arrays, and
    its PNG bytes come with its pixels' CRC-32 (``(bytes, crc)``)."""
    sample_id, image = item
    array = prepare(image, image_size, what=f"sample {sample_id!r}")
    got: dict[str, np.ndarray | None] = {}
    png: dict[str, bytes | tuple[bytes, str]] = {}
    jobs = []
    content = known_hash(array) if cache is not None else ""
    for key, name, severity in parsed:
        if name is None:
            got[key] = array
            continue
        ckey = None
        if cache is not None:
            ckey = CacheKey(content, image_size, name, severity, seed, str(sample_id))
            if keep and files_only:
                checked = cache.read_file(ckey, array.shape)
                if checked is not None:
                    got[key], png[key] = None, checked
                    continue
            if keep:
                hit = cache.read(ckey, array.shape)
                if hit is not None:
                    got[key], png[key] = hit
                    continue
            elif cache.path(ckey).exists():  # filling only: presence is enough
                got[key] = array
                continue
        jobs.append((key, name, severity, ckey))
    return sample_id, array, got, png, jobs


#: Content hashes of arrays that cannot change (:func:`remember_hash`), by ``id``; an entry
#: leaves with its array.
_HASHES: dict[int, str] = {}


def remember_hash(array: np.ndarray) -> np.ndarray:
    """Make ``array`` read-only and remember its content hash, so that the many conditions of
    one prepared image hash it once (the suite keeps its prepared images: ``PreparedImages``).
    Returns the array."""
    array.flags.writeable = False
    key = id(array)
    if key not in _HASHES:
        _HASHES[key] = content_hash(array)
        weakref.finalize(array, _HASHES.pop, key, None)
    return array


def known_hash(array: np.ndarray) -> str:
    """:func:`content_hash`, remembered for arrays given to :func:`remember_hash`."""
    digest = _HASHES.get(id(array)) if not array.flags.writeable else None
    return digest if digest is not None else content_hash(array)


def _generate(
    images: Sequence[ImageItem],
    conditions: Sequence[str],
    *,
    image_size: int | None,
    seed: int,
    cache: CorruptionCache | None,
    workers: int,
    progress: bool,
    keep: bool,
    counts: dict[str, int] | None = None,
    encoded: dict[str, bytes] | None = None,
    read_threads: int = 1,
    pixel_crcs: dict[str, str] | None = None,
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """The shared engine of :func:`iter_materialize` (``keep``) and :func:`prefill` (not).

    ``counts["computed"]`` is incremented by the number of cache misses computed. ``encoded``,
    when given, is refilled before each yield with the cache's PNG bytes of that sample's
    conditions that were cache hits (``{condition: bytes}``).
    """
    from tqdm.auto import tqdm

    parsed = _parse_conditions(conditions)
    _check_images(images, workers)
    pool = _pool(workers) if workers > 1 else None
    window = max(8, 4 * workers)
    # Split one image's work across idle workers when there are fewer images than workers.
    spread = math.ceil(workers / max(1, len(images)))
    total = len(images) * len(parsed)
    bar = tqdm(total=total, desc="corruptions", unit="img", disable=not progress)

    pending: deque[tuple[str, dict[str, np.ndarray], dict[str, bytes], list[Future], int]]
    pending = deque()
    in_flight = 0
    look_up = partial(
        _look_up, parsed=parsed, image_size=image_size, seed=seed, cache=cache, keep=keep,
        files_only=pixel_crcs is not None and encoded is not None,
    )  # fmt: skip

    def done(
        sid: str, got: dict[str, np.ndarray], png: dict[str, bytes | tuple[bytes, str]]
    ) -> tuple[str, dict[str, np.ndarray]]:
        if encoded is not None:
            encoded.clear()
            if pixel_crcs is not None:
                pixel_crcs.clear()
            for key, value in png.items():
                if isinstance(value, tuple):
                    encoded[key], pixel_crcs[key] = value  # type: ignore[index]
                else:
                    encoded[key] = value
        return sid, ({key: got[key] for key, _, _ in parsed} if keep else {})

    def drain(block_until: int) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
        nonlocal in_flight
        while pending and (in_flight > block_until or all(f.done() for f in pending[0][3])):
            sid, got, png, futures, n_jobs = pending.popleft()
            for f in futures:
                got.update(f.result())
                in_flight -= 1
            bar.update(n_jobs)
            yield done(sid, got, png)

    try:
        for sample_id, array, got, png, jobs in _ordered(look_up, images, window, read_threads):
            if counts is not None:
                counts["computed"] = counts.get("computed", 0) + len(jobs)
            bar.update(len(got))
            if pool is None:
                got.update(_compute(sample_id, array, jobs, seed, cache, keep))
                bar.update(len(jobs))
                yield done(sample_id, got, png)
                continue
            n_tasks = min(len(jobs), max(math.ceil(len(jobs) / _MAX_TASK_CONDITIONS), spread))
            futures = [
                pool.submit(_compute, sample_id, array, jobs[i::n_tasks], seed, cache, keep)
                for i in range(n_tasks)
            ]
            in_flight += len(futures)
            pending.append((sample_id, got, png, futures, len(jobs)))
            yield from drain(block_until=window)
        yield from drain(block_until=-1)
    except BrokenProcessPool:
        _POOLS.pop(workers, None)  # a worker died; the next call starts a fresh pool
        raise
    finally:
        for _, _, _, futures, _ in pending:
            for f in futures:
                f.cancel()
        bar.close()


def iter_materialize(
    images: Sequence[ImageItem],
    conditions: Sequence[str],
    *,
    image_size: int | None,
    seed: int,
    cache: CorruptionCache | None = None,
    workers: int = 1,
    progress: bool = False,
    encoded: dict[str, bytes] | None = None,
    read_threads: int = 1,
    pixel_crcs: dict[str, str] | None = None,
    keep: bool = True,
) -> Iterator[tuple[str, dict[str, np.ndarray]]]:
    """Yield ``(sample_id, {condition: (H, W, 3) uint8 array})`` per image, in input order.

    Streaming keeps memory bounded (a few hundred samples x 95 conditions do not fit at once);
    the pool works ahead of the consumer by a bounded number of tasks. Conditions keep their
    given order (duplicates dropped); ``"clean"`` maps to the prepared image itself.
    ``encoded``: a dict refilled at each yield with ``{condition: PNG bytes}`` of the conditions
    read from the cache (the file's bytes, which a server backend sends without re-encoding).
    ``read_threads`` > 1 prepares images and reads cache hits in that many threads ahead.
    ``pixel_crcs`` (with ``encoded``): files only, for a reader that sends the files and
    never reads pixels (a server backend): a cache hit whose file checks without decoding
    (:meth:`CorruptionCache.read_file`) is yielded as ``None``, its bytes in ``encoded`` and
    its pixels' CRC-32 in this dict, refilled at each yield like ``encoded``.
    ``keep=False`` only fills the cache, sample by sample (:func:`prefill` that yields an
    empty dict per image): an entry present is not read, a missing one is computed.
    """
    _parse_conditions(conditions)  # fail here, not at the first next()
    _check_images(images, workers)
    return _generate(
        images,
        conditions,
        image_size=image_size,
        seed=seed,
        cache=cache,
        workers=workers,
        progress=progress,
        keep=keep,
        encoded=encoded,
        read_threads=read_threads,
        pixel_crcs=pixel_crcs,
    )


def prefill(
    images: Sequence[ImageItem],
    conditions: Sequence[str],
    *,
    image_size: int | None,
    seed: int,
    cache: CorruptionCache,
    workers: int = 1,
    progress: bool = False,
) -> int:
    """Compute every missing ``(image, condition)`` into ``cache``, keeping nothing in memory.

    The cheap way to warm the cache for a whole grid before per-cell :func:`materialize` calls.
    Returns how many images were computed (cache misses).
    """
    if cache is None:
        raise ValueError("prefill needs a CorruptionCache to fill")
    counts = {"computed": 0}
    for _ in _generate(
        images,
        conditions,
        image_size=image_size,
        seed=seed,
        cache=cache,
        workers=workers,
        progress=progress,
        keep=False,
        counts=counts,
    ):
        pass
    return counts["computed"]


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
