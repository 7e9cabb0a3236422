"""Run orchestration: dataset -> corruptions -> backend -> results store, one condition at a time.

Each condition is computed in batches through :meth:`ResultStore.get_or_compute`, so a killed
run resumes at the first unfinished batch and an xdist worker that needs a condition another
worker is computing waits for it instead of duplicating it. Metrics are then pure functions of
the stored arrays (``benchc.metrics``).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cached_property

import numpy as np

from benchc import spec
from benchc.corruptions import (
    ENGINE_VERSION,
    READ_THREADS,
    CorruptionCache,
    default_cache_root,
    iter_materialize,
    library_version,
    region_blur,
    resolve_locator,
    scale_region,
    whole_blur,
)
from benchc.data.images import prepare
from benchc.data.sample import Dataset
from benchc.fsutil import slug
from benchc.metrics import GridMetrics, compute_grid
from benchc.models.base import Backend, Query
from benchc.models.collate import score
from benchc.provenance import environment, numeric_versions
from benchc.results import ResultStore, RunKey, StoreError
from benchc.results.reader import SAMPLES, VSI, stack_conditions
from benchc.results.store import StoreRepairWarning
from benchc.suite.config import SuiteConfig


class SuiteRun:
    """One model on one dataset under one set of settings, backed by a :class:`ResultStore`."""

    def __init__(
        self,
        cfg: SuiteConfig,
        dataset: Dataset,
        backend: Backend,
        *,
        corruption_workers: int = 1,
    ) -> None:
        self.cfg = cfg
        self.dataset = dataset
        self.backend = backend
        self.image_size = cfg.resolved_image_size()
        self.batch_size = cfg.batch_size or backend.batch_size
        #: Rows per stored batch: a few forward batches, so a kill loses little and files stay few.
        self.chunk_rows = 4 * self.batch_size
        self.corruption_workers = corruption_workers
        self.cache = CorruptionCache(cfg.cache_dir or default_cache_root())
        self.key = RunKey(
            model_fingerprint=backend.fingerprint,
            dataset_fingerprint=dataset.fingerprint,
            settings={
                "image_size": self.image_size,
                "seed": cfg.seed,
                "batch_size": self.batch_size,
                "corruption_engine": ENGINE_VERSION,
                "imagecorruptions": library_version(),
                "prompt": spec.PROMPT_VERSION,
                **numeric_versions(),  # a torch or transformers upgrade recomputes
            },
            model_name=backend.name,
            dataset_name=dataset.name,
        )
        self.store = ResultStore(cfg.results_dir, self.key, lock_timeout=cfg.lock_timeout)
        self.locator = resolve_locator(cfg.region_locator)
        #: The VSI arrays depend on the locator, the cells do not: only VSI's stored name has it.
        self.vsi_name = VSI if cfg.region_locator == "none" else f"{VSI}.{slug(cfg.region_locator)}"
        self.k_max = int(dataset.n_options.max())
        self._grids: dict[tuple[str, ...], GridMetrics] = {}  # metrics are pure: memoise
        self._prefetcher: threading.Thread | None = None
        self._stop_prefetch = threading.Event()
        self._write_samples()

    # -- bookkeeping ------------------------------------------------------------------------
    def _write_samples(self) -> None:
        """The per-sample table and the manifest; a missing or damaged one is (re)written, so a
        later run and ``benchc report`` on this store work again."""
        table = {
            "ids": np.array(self.dataset.ids, dtype=np.str_),
            "answers": self.dataset.answers,
            "n_options": self.dataset.n_options,
        }
        try:
            stored = self.store.load(SAMPLES) if self.store.has(SAMPLES) else None
        except StoreError as err:
            warnings.warn(f"{err}; rewriting it", StoreRepairWarning, stacklevel=2)
            stored = None
        if stored is None or not _same_arrays(stored, table):
            self.store.save(SAMPLES, table)
        if not self.store.manifest_ok():
            self.store.write_manifest(
                {"model_spec": self.cfg.model, "dataset_spec": self.cfg.dataset,
                 "environment": environment(self.backend)}
            )  # fmt: skip

    def note_access(self) -> None:
        """Record in the manifest how the option distributions were actually obtained
        (``Capabilities.option_distribution``): a server's first query can narrow it after the
        run's key was fixed, and a report pairing a white-box run with its sampling proxy
        (Bench-C Table V) must know which route was taken."""
        access = self.backend.capabilities.option_distribution
        meta = self.store.manifest()
        if meta.get("option_access") != access:
            kept = {k: meta[k] for k in ("model_spec", "dataset_spec", "environment") if k in meta}
            self.store.write_manifest({**kept, "option_access": access})

    @property
    def ids(self) -> list[str]:
        return self.dataset.ids

    @cached_property
    def _pil(self) -> list:
        """Decoded images, fully loaded: PIL decodes lazily and its lazy load is not
        thread-safe, and the corruption prefetch thread reads these too."""
        images = []
        for sample in self.dataset:
            image = sample.image()
            image.load()
            images.append(image)
        return images

    def _items(self, start: int, stop: int) -> list[tuple[str, object]]:
        return [(self.dataset[i].id, self._pil[i]) for i in range(start, stop)]

    def _queries(
        self,
        images: Sequence[np.ndarray],
        start: int,
        encoded: Sequence[bytes | None] | None = None,
    ) -> list[Query]:
        """Queries of rows ``start:start+len(images)``; ``encoded``: each image's PNG file bytes
        when it came from the corruption cache (sent to servers as they are)."""
        files = encoded if encoded is not None else [None] * len(images)
        out = []
        for offset, (image, png) in enumerate(zip(images, files, strict=True)):
            s = self.dataset[start + offset]
            out.append(
                Query(
                    image=image,
                    question=s.question,
                    options=s.options,
                    hint=s.hint,
                    id=s.id,
                    encoded=png,
                )
            )
        return out

    # -- option logits per condition ---------------------------------------------------------
    def condition(self, key: str) -> dict[str, np.ndarray]:
        """Option logits (N, K_max) and option mass (N,) under condition ``key``.

        When the model does not compute on this machine's CPU (a server, a GPU), the next
        stored chunk's images are read from the corruption cache while one is scored, in
        threads (decoding overlaps the model instead of alternating with it); beside a CPU
        model that would only compete for its cores. The batches, and so every number, are
        those of a plain loop either way.
        """
        spec.parse_condition(key)  # clear error for a bad key
        n = len(self.dataset)
        ahead: dict[tuple[int, int], Future] = {}

        def compute(start: int, stop: int) -> dict[str, np.ndarray]:
            pending = ahead.pop((start, stop), None)
            images, files = pending.result() if pending else self._read(key, start, stop)
            if stop < n and not self.backend.local_cpu:
                nxt = (stop, min(n, stop + self.chunk_rows))
                ahead[nxt] = self._reader.submit(self._read, key, *nxt)
            queries = self._queries(images, start, files)
            out = score(self.backend, queries, batch_size=self.batch_size)
            scored.append(stop - start)
            logits = np.full((stop - start, self.k_max), np.nan, dtype=np.float32)
            width = out.option_logits.shape[1]
            logits[:, :width] = out.option_logits
            return {"option_logits": logits, "option_mass": out.option_mass.astype(np.float32)}

        scored: list[int] = []
        try:
            arrays = self.store.get_or_compute(key, n, self.chunk_rows, compute)
            if scored:
                self.note_access()
            return arrays
        finally:
            for future in ahead.values():  # read ahead but not needed (stored, or an error)
                if not future.cancel():
                    future.exception()  # wait for it: no read outlives the call

    def _read(self, key: str, start: int, stop: int) -> tuple[list[np.ndarray], list]:
        """Rows ``start:stop`` under ``key``: the images, and each one's PNG file bytes when it
        was read from the corruption cache (``None`` otherwise)."""
        images, files = [], []
        encoded: dict[str, bytes] = {}
        for _, by_cond in iter_materialize(
            self._items(start, stop),
            [key],
            image_size=self.image_size,
            seed=self.cfg.seed,
            cache=self.cache,
            workers=self.corruption_workers,
            encoded=encoded,
            read_threads=1 if self.backend.local_cpu else READ_THREADS,
        ):
            images.append(by_cond[key])
            files.append(encoded.get(key))
        return images, files

    @cached_property
    def _reader(self) -> ThreadPoolExecutor:
        """The one read-ahead thread of :meth:`condition`."""
        return ThreadPoolExecutor(1, thread_name_prefix="benchc-read-ahead")

    def start_prefetch(self, keys: Sequence[str]) -> None:
        """Warm the corruption cache for ``keys`` in a background thread, condition by
        condition in the order the cells will run.

        On a cold cache this overlaps the corruption pool with the model instead of
        alternating them (the model waits less on each cell). Best effort: anything the
        prefetch has not reached is computed by :meth:`condition` itself.
        """
        todo = [k for k in dict.fromkeys(keys) if k != spec.CLEAN and not self.store.has(k)]
        if not todo or self.corruption_workers < 2 or self._prefetcher is not None:
            return
        items = self._items(0, len(self.dataset))  # decode here, before a second thread reads

        def work() -> None:
            try:
                for key in todo:
                    if self._stop_prefetch.is_set() or self.store.has(key):
                        continue
                    for _ in iter_materialize(
                        items,
                        [key],
                        image_size=self.image_size,
                        seed=self.cfg.seed,
                        cache=self.cache,
                        workers=self.corruption_workers,
                    ):
                        if self._stop_prefetch.is_set():
                            return
            except Exception:  # the main thread recomputes, and reports any real error
                return

        self._prefetcher = threading.Thread(target=work, name="benchc-prefetch", daemon=True)
        self._prefetcher.start()

    def stop_prefetch(self) -> None:
        if self._prefetcher is not None:
            self._stop_prefetch.set()
            self._prefetcher.join()
            self._prefetcher = None

    # -- metrics ------------------------------------------------------------------------------
    def grid(self, keys: Sequence[str] | None = None) -> GridMetrics:
        """Bench-C figures over the selected corruptions x severities (or one cell's keys)."""
        keys = list(keys) if keys is not None else self.cfg.conditions
        memo = self._grids.get(tuple(keys))
        if memo is not None:
            return memo
        parsed = [spec.parse_condition(k) for k in keys]
        corruptions = list(dict.fromkeys(c for c, _ in parsed))
        severities = sorted({s for _, s in parsed})
        if len(keys) != len(corruptions) * len(severities):
            raise ValueError(f"conditions {keys} do not form a full corruption x severity grid")
        clean = self.condition(spec.CLEAN)["option_logits"]
        cube = stack_conditions(
            lambda key: self.condition(key)["option_logits"], corruptions, severities
        )
        grid = compute_grid(
            clean,
            cube,
            self.dataset.answers,
            self.dataset.n_options,
            corruptions=tuple(corruptions),
        )
        self._grids[tuple(keys)] = grid
        return grid

    def cell(self, key: str) -> GridMetrics:
        """The (N, 1, 1) grid of one condition."""
        return self.grid([key])

    # -- VSI inputs (the arrays themselves: benchc.suite.vsi.vsi_arrays) ------------------------
    def prepared(self, start: int, stop: int) -> list[np.ndarray]:
        """Clean images at the run's image size (what the corruptions start from)."""
        return [
            prepare(self._pil[i], self.image_size, what=f"sample {self.dataset[i].id!r}")
            for i in range(start, stop)
        ]

    def blurred(self, start: int, stop: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Region-blurred images (docs/spec.md §5), and bool arrays marking regions found by the
        locator and whole-image fallbacks (no annotation and no located region)."""
        n = stop - start
        images, located, fallback = [], np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        for offset, (i, array) in enumerate(
            zip(range(start, stop), self.prepared(start, stop), strict=True)
        ):
            region, src = self.dataset[i].region, self._pil[i].size
            if region is None and self.locator is not None:
                region = self.locator(self._pil[i])
                located[offset] = region is not None
            if region is None:
                images.append(whole_blur(array, spec.VSI_SIGMA))
                fallback[offset] = True
                continue
            dst = (array.shape[1], array.shape[0])
            images.append(region_blur(array, scale_region(region, src, dst), sigma=spec.VSI_SIGMA))
        return images, located, fallback


#: Environment variable overriding the corruption pool size (tests use it to force a pool).
WORKERS_ENV = "BENCHC_CORRUPTION_WORKERS"


def default_corruption_workers(worker_id: str | None) -> int:
    """All cores for a plain run; one per xdist worker (the workers are the parallelism);
    ``$BENCHC_CORRUPTION_WORKERS`` overrides both."""
    raw = os.environ.get(WORKERS_ENV)
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise ValueError(f"{WORKERS_ENV}={raw!r} must be a positive integer")
        return int(raw)
    if worker_id and worker_id != "master":
        return 1
    return max(1, min(8, os.cpu_count() or 1))


def _same_arrays(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return set(a) == set(b) and all(
        a[k].shape == b[k].shape and np.array_equal(a[k], b[k]) for k in a
    )


def describe_store(run: SuiteRun) -> str:
    done = [k for k in run.cfg.conditions if run.store.has(k)]
    return f"{run.store.run_dir} ({len(done)}/{len(run.cfg.conditions)} cells stored)"
