"""Run orchestration: dataset -> corruptions -> backend -> results store, one condition at a time.

Each condition is computed in batches through :meth:`ResultStore.get_or_compute`, so a killed
run resumes at the first unfinished batch and an xdist worker that needs a condition another
worker is computing waits for it instead of duplicating it. Metrics are then pure functions of
the stored arrays (``benchc.metrics``).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from functools import cached_property
from typing import Any, NamedTuple

import numpy as np
from PIL import Image

from benchc import spec
from benchc.corruptions import (
    ENGINE_VERSION,
    READ_THREADS,
    CorruptionCache,
    cached_blur,
    cached_blur_file,
    default_cache_root,
    iter_materialize,
    library_version,
    resolve_locator,
    scale_region,
)
from benchc.corruptions.batch import known_hash, remember_hash
from benchc.corruptions.cache import PreparedKey
from benchc.corruptions.vsi import Region
from benchc.data.images import prepare
from benchc.data.sample import Dataset
from benchc.errors import InfrastructureError
from benchc.fsutil import slug
from benchc.metrics import GridMetrics, compute_grid
from benchc.metrics.options import require_answered
from benchc.models.base import Backend, Query
from benchc.models.gpus import xdist_workers
from benchc.models.pipeline import ChunkId, Lookahead
from benchc.provenance import environment, numeric_versions
from benchc.results import ResultStore, RunKey, StoreError
from benchc.results.reader import ORDER, SAMPLES, VSI, order_name, stack_conditions
from benchc.results.store import chunk_bounds
from benchc.suite.config import SuiteConfig
from benchc.suite.share import SHARE_WAIT_S, compute_shared

#: What the manifest says about the model and how it ran, kept when it is rewritten.
MANIFEST_KEPT = ("model_spec", "dataset_spec", "environment", "capabilities", "created",
                 "command_line", "benchc_commit", "model_revision")  # fmt: skip


class SuiteRun:
    """One model on one dataset under one set of settings, backed by a :class:`ResultStore`."""

    def __init__(
        self,
        cfg: SuiteConfig,
        dataset: Dataset,
        backend: Backend,
        *,
        corruption_workers: int = 1,
        key: RunKey | None = None,
        device_class: str | None = None,
        record: bool = True,
    ) -> None:
        """``key``: the run key to read and write under instead of this process's own (a Ray
        driver takes its actors', ``--from-store`` the stored one); ``device_class``: enters the
        key of a distributed run (:mod:`benchc.engine.devices`); ``record``: write the sample
        table and manifest (an actor does not: the driver is the store's only writer)."""
        self.cfg = cfg
        self.dataset = dataset
        self.backend = backend
        self.image_size = cfg.resolved_image_size()
        self.batch_size = cfg.batch_size or backend.batch_size
        #: Rows per stored batch: a few forward batches, so a kill loses little and files stay few.
        self.chunk_rows = 4 * self.batch_size
        self.corruption_workers = corruption_workers
        self.cache = CorruptionCache(cfg.cache_dir or default_cache_root())
        own = self._own_key(device_class)
        self.key = own if key is None else key
        self.store = self._open_store()
        self.locator = resolve_locator(cfg.region_locator)
        #: The VSI arrays depend on the locator, the cells do not: only VSI's stored name has it.
        self.vsi_name = VSI if cfg.region_locator == "none" else f"{VSI}.{slug(cfg.region_locator)}"
        self.k_max = int(dataset.n_options.max())
        self._grids: dict[tuple[str, ...], GridMetrics] = {}  # metrics are pure: memoise
        self._prefetcher: threading.Thread | None = None
        self._stop_prefetch = threading.Event()
        #: Conditions in the order the cases will ask for them (the pipeline builds across
        #: condition boundaries in this order); set by :meth:`start_prefetch`.
        self.planned: list[str] = []
        self._originals = PreparedImages(self, ORIGINALS_BUDGET)
        self._vsi_ahead: dict[tuple[int, int], Future] = {}
        self.lookahead = Lookahead(self.backend, self.batch_size, workers=_prepare_workers(backend))
        #: Queries scored and seconds spent scoring them in this process (the summary's
        #: throughput line).
        self.scored_queries = 0
        self.scoring_s = 0.0
        self.progress: Callable[[int], None] | None = None
        #: (this worker, workers) when several xdist workers of one suite run share the store's
        #: entries: only a run the plugin configured as an xdist worker's (``cfg.worker_id``);
        #: a SuiteRun built elsewhere in a worker process (a library call, a test) shares nothing.
        index, count = xdist_workers() if (cfg.worker_id or "").startswith("gw") else (None, 0)
        self.share_as = (index or 0, count)
        self._progress: Any = None
        self._route_state(backend)
        if record:
            self._write_samples()

    def _route_state(self, backend: Backend) -> None:
        """How answers are scored (a served backend's route) and the served client's liveness
        lines: :mod:`benchc.suite.route`."""
        #: The baseline's recorded route (``option_access``), None when there is none to check
        #: (a recording; a baseline recorded before routes were): set by the session.
        self.baseline_route: Callable[[], str | None] = lambda: None
        self._route: str | None = None
        #: Set when stored rows of another route were dropped (the summary's line).
        self.route_note: str | None = None
        client = getattr(backend, "client", None)
        if client is not None and hasattr(client, "notify"):
            from benchc.suite.progress import terminal_writer

            client.notify = terminal_writer(None)  # liveness lines past pytest's capture

    def _own_key(self, device_class: str | None) -> RunKey:
        """This process's run key: the model, the dataset and every setting that changes the
        stored numbers (a distributed run's ``device_class`` too)."""
        return RunKey(
            model_fingerprint=self.backend.fingerprint,
            dataset_fingerprint=self.dataset.fingerprint,
            settings={
                "image_size": self.image_size,
                "seed": self.cfg.seed,
                "batch_size": self.batch_size,
                "corruption_engine": ENGINE_VERSION,
                "imagecorruptions": library_version(),
                "prompt": spec.PROMPT_VERSION,
                **numeric_versions(),  # a torch or transformers upgrade recomputes
                **({"device_class": device_class} if device_class else {}),
            },
            model_name=self.backend.name,
            dataset_name=self.dataset.name,
        )

    def _open_store(self) -> ResultStore:
        """The results store under ``self.key``, refused when the key was computed at another
        batch size (its stored batches would not line up with this run's)."""
        cfg = self.cfg
        if self.key.settings.get("batch_size") != self.batch_size:
            raise StoreError(
                f"run key {self.key.dirname()} was computed at batch size "
                f"{self.key.settings.get('batch_size')}, this run's is {self.batch_size}"
            )
        return ResultStore(
            cfg.results_dir,
            self.key,
            lock_timeout=cfg.lock_timeout,
            read_only=None if cfg.from_store is None else f"--from-store {cfg.from_store}",
            location=str(cfg.from_store) if "://" in str(cfg.from_store) else None,
        )

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
            self.store.repaired.append((self.store.path(SAMPLES), str(err)))
            stored = None
        if stored is None or not _same_arrays(stored, table):
            self.store.save(SAMPLES, table)
        if not self.store.manifest_ok():
            from benchc.provenance import git_commit, invocation

            now = invocation()
            now["command_line"] = self.cfg.command_line or now["command_line"]
            self.store.write_manifest(
                {"model_spec": self.cfg.model, "dataset_spec": self.cfg.dataset,
                 "environment": environment(self.backend), "created": now["date"],
                 "command_line": now["command_line"], "benchc_commit": git_commit(),
                 "model_revision": self.cfg.revision,
                 "capabilities": asdict(self.backend.capabilities)}
            )  # fmt: skip

    def note_access(self) -> None:
        """Record in the manifest how the option distributions were actually obtained
        (``Capabilities.option_distribution``): a server's first query can narrow it after the
        run's key was fixed, and a report pairing a white-box run with its sampling proxy
        (Bench-C Table V) must know which route was taken."""
        access = self.backend.capabilities.option_distribution
        meta = self.store.manifest()
        if meta.get("option_access") != access:
            kept = {k: meta[k] for k in MANIFEST_KEPT if k in meta}
            self.store.write_manifest({**kept, "option_access": access})

    def settle_route(self) -> str:
        """The run's route, decided once before its first query (a served backend probes the
        server: :meth:`benchc.models.proxy.OpenAIProxyBackend.settle_route`), checked against
        the baseline's (:class:`benchc.suite.route.RouteMismatch`); stored rows of another
        route (written by a run that changed route on a glitch) are dropped to be recomputed,
        so a rerun never keeps them."""
        if self._route is not None:
            return self._route
        from benchc.suite.route import check_route

        try:
            stored = self.store.manifest().get("option_access")
        except StoreError:
            stored = None
        settle = getattr(self.backend, "settle_route", None)
        if settle is not None and len(self.dataset):
            image = self._originals[0]
            route = settle(self._queries([image], 0)[0])
        else:  # a stand-in for a stored run (--from-store, Ray): the route it recorded
            route = stored or self.backend.capabilities.option_distribution
        check_route(self.baseline_route(), route)
        if stored is not None and stored != route and self.store.read_only is None:
            self._drop_stored(stored, route)
        self._route = route
        return route

    def _drop_stored(self, stored: str, route: str) -> None:
        import shutil

        names = [n for n in self.store.names() if n != SAMPLES]
        for name in names:
            self.store.path(name).unlink(missing_ok=True)
        shutil.rmtree(self.store.run_dir / ".parts", ignore_errors=True)
        meta = self.store.manifest()
        kept = {k: meta[k] for k in MANIFEST_KEPT if k in meta}
        self.store.write_manifest({**kept, "option_access": route})
        self.route_note = (
            f"{len(names)} stored entr(ies) of {self.store.run_dir} were scored by {stored}, "
            f"this run's route is {route}: dropped and recomputed"
        )

    @property
    def ids(self) -> list[str]:
        return self.dataset.ids

    def original(self, i: int) -> Image.Image:
        """Sample ``i``'s decoded original, fully loaded (decoded on demand, never kept: the
        run keeps the prepared images, :class:`PreparedImages`)."""
        image = self.dataset[i].image()
        image.load()
        return image

    def _items(self, start: int, stop: int) -> list[tuple[str, object]]:
        """Rows ``start:stop`` as ``(id, prepared image)``: the corruptions start from the
        prepared image, and preparing it again is the identity (``prepare`` is idempotent)."""
        return [(self.dataset[i].id, self._originals[i]) for i in range(start, stop)]

    def _queries(
        self,
        images: Sequence[np.ndarray | None],
        start: int,
        encoded: Any = None,
    ) -> list[Query]:
        """Queries of rows ``start:start+len(images)``; ``encoded``: each image's PNG file bytes
        when it came from the corruption cache (sent to servers as they are), or ``(bytes,
        pixel CRCs)`` from a files-only read (an image ``None`` is its file, not decoded)."""
        crcs = None
        if isinstance(encoded, tuple):
            encoded, crcs = encoded
        files = encoded if encoded is not None else [None] * len(images)
        crcs = crcs if crcs is not None else [None] * len(images)
        out = []
        for offset, (image, png, crc) in enumerate(zip(images, files, crcs, strict=True)):
            s = self.dataset[start + offset]
            out.append(
                Query(
                    image=image,
                    question=s.question,
                    options=s.options,
                    hint=s.hint,
                    id=s.id,
                    encoded=png,
                    pixel_crc=crc,
                )
            )
        return out

    # -- option logits per condition ---------------------------------------------------------
    @property
    def pipelined(self) -> bool:
        """Whether batches are built ahead in threads: when the model does not compute on this
        machine's CPU (a server, a GPU); beside a CPU model the threads only compete for its
        cores. The batches, and so every number, are those of a plain loop either way."""
        return not self.backend.local_cpu

    def condition(self, key: str) -> dict[str, np.ndarray]:
        """Option logits (N, K_max) and option mass (N,) under condition ``key``.

        Pipelined (:attr:`pipelined`), the next stored chunk -- of this condition, else the
        first of the next planned one -- is read, planned and its batches prepared
        (:class:`benchc.models.pipeline.Lookahead`) while this one is scored.
        """
        spec.parse_condition(key)  # clear error for a bad key

        def compute(start: int, stop: int) -> dict[str, np.ndarray]:
            scored.append(stop - start)
            return self.compute_chunk(key, start, stop)

        scored: list[int] = []
        ok = False
        try:
            arrays = self.get_or_compute(key, compute)
            if scored:
                self.note_access()
            ok = True
            return arrays
        finally:
            # Built ahead but not needed (stored meanwhile, or an error): dropped, waited for.
            if ok and self.pipelined:
                self._schedule_next_condition(key)
                self.lookahead.discard(keep=lambda ident: ident[0] != key)
            else:
                self.lookahead.discard()

    def rotated(self, key: str) -> dict[str, np.ndarray]:
        """Condition ``key``'s option logits under each sample's rotations other than 0
        (``option_logits`` (N, R_max - 1, K_max), ``offsets`` (N, R_max); docs/spec.md §1,
        option order), stored and resumed like a condition (``order.<key>``)."""
        spec.parse_condition(key)
        scored: list[int] = []

        def compute(start: int, stop: int) -> dict[str, np.ndarray]:
            scored.append(stop - start)
            return self.compute_chunk(order_name(key), start, stop)

        try:
            arrays = self.get_or_compute(order_name(key), compute)
        finally:
            self.lookahead.discard()
        if scored:
            self.note_access()
        return arrays

    def compute_chunk(self, name: str, start: int, stop: int) -> dict[str, np.ndarray]:
        """The unit of work: rows ``start:stop`` of stored entry ``name`` (a condition, or
        :attr:`vsi_name`), exactly as stored. Every executor calls this one function -- this
        process's own loop, an xdist worker, a Ray actor (:mod:`benchc.engine.ray`) -- so a
        chunk's bytes do not depend on who computed it."""
        try:
            return self._compute_chunk(name, start, stop)
        except InfrastructureError as err:
            if err.item is None or f" under {name}" in err.item:
                raise
            raise InfrastructureError(
                err.where, err.what, item=f"{err.item} under {name}", attempts=err.attempts,
                hint=err.hint,
            ) from err  # fmt: skip

    def _compute_chunk(self, name: str, start: int, stop: int) -> dict[str, np.ndarray]:
        if name == self.vsi_name:
            from benchc.suite.vsi import compute_vsi_batch

            return compute_vsi_batch(self, start, stop)
        if name.startswith(f"{ORDER}."):
            return self._rotated_chunk(name[len(ORDER) + 1 :], start, stop)
        spec.parse_condition(name)
        chunk = self.lookahead.take(
            (name, start, stop), self._builder(name, start, stop), ahead=self.pipelined
        )
        if self.pipelined:
            self._schedule_after((name, start, stop))
        began = time.perf_counter()
        out = chunk.run(self.backend, progress=self.progress)
        self.scoring_s += time.perf_counter() - began
        self.scored_queries += stop - start
        logits = np.full((stop - start, self.k_max), np.nan, dtype=np.float32)
        width = out.option_logits.shape[1]
        logits[:, :width] = out.option_logits
        return {"option_logits": logits, "option_mass": out.option_mass.astype(np.float32)}

    def _rotated_chunk(self, key: str, start: int, stop: int) -> dict[str, np.ndarray]:
        """Rows ``start:stop`` of condition ``key`` under their rotations other than 0, in the
        backend's own batches (the same image and question, the options rotated)."""
        from benchc.data.rotations import n_rotations, rotations
        from benchc.models.rotations import by_slot, offset_table, rotated_queries

        plans: list[tuple[int, ...]] = []

        def build() -> tuple[list[Query], None]:
            images, files = self._read(key, start, stop)
            flat = []
            for q in self._queries(images, start, files):
                offsets = rotations(len(q.options), str(q.id), self.cfg.seed)
                plans.append(offsets)
                flat += rotated_queries(q, offsets[1:])
            return flat, None

        chunk = self.lookahead.take((order_name(key), start, stop), build)
        began = time.perf_counter()
        out = chunk.run(self.backend, progress=self.progress)
        self.scoring_s += time.perf_counter() - began
        self.scored_queries += len(out.option_logits)
        r_max = n_rotations(self.k_max)
        logits = np.full((stop - start, r_max - 1, self.k_max), np.nan, dtype=np.float32)
        others = by_slot(out.option_logits, [p[1:] for p in plans], r_max - 1)
        logits[..., : others.shape[-1]] = others
        return {"option_logits": logits, "offsets": offset_table(plans, r_max)}

    def chunks(self, name: str) -> list[tuple[int, int]]:
        """Entry ``name``'s chunks as ``(start, stop)`` rows: the store's unit of resumption."""
        return chunk_bounds(len(self.dataset), self.chunk_rows)

    def get_or_compute(
        self, name: str, compute: Callable[[int, int], dict[str, np.ndarray]]
    ) -> dict[str, np.ndarray]:
        """Entry ``name`` of the store, computed in chunks; under xdist together with the other
        workers that need it (:mod:`benchc.suite.share`) instead of waiting for one of them."""
        from benchc.suite.outputs import stop_when_refused

        self.settle_route()
        n = len(self.dataset)
        worker, workers = self.share_as
        with stop_when_refused(self.cfg):  # a full disk: one line, not a traceback per case
            if workers > 1 and self.store.read_only is None and not self.store.has(name):
                compute_shared(
                    self.store,
                    name,
                    n,
                    self.chunk_rows,
                    compute,
                    worker=worker,
                    workers=workers,
                    wait_s=self.cfg.lock_timeout or SHARE_WAIT_S,
                )
            return self.store.get_or_compute(name, n, self.chunk_rows, compute)

    def _builder(self, key: str, start: int, stop: int):
        def build() -> tuple[list[Query], None]:
            images, files = self._read(key, start, stop)
            return self._queries(images, start, files), None

        return build

    def _schedule_after(self, ident: ChunkId) -> None:
        """Build the chunk after ``ident`` ahead while ``ident`` runs: the next of its condition,
        else (``ident`` is its condition's last) the first of the next planned condition not
        stored yet, so the device does not wait at condition boundaries either."""
        key, _, stop = ident
        n = len(self.dataset)
        if stop < n:
            nxt = (stop, min(n, stop + self.chunk_rows))
            self.lookahead.schedule((key, *nxt), self._builder(key, *nxt))
        else:
            self._schedule_next_condition(key)

    def _schedule_next_condition(self, key: str) -> None:
        if key not in self.planned:
            return
        for other in self.planned[self.planned.index(key) + 1 :]:
            if other != key and not self.store.has(other):
                stop = min(len(self.dataset), self.chunk_rows)
                self.lookahead.schedule((other, 0, stop), self._builder(other, 0, stop))
                return

    def pending_queries(self, keys: Sequence[str], rotated: Sequence[str] = ()) -> int:
        """Queries the conditions ``keys`` and the rotations of ``rotated`` still need (the
        stored ones need none): one per sample and condition, R - 1 per sample and rotated
        condition."""
        from benchc.data.rotations import n_rotations

        todo = [k for k in dict.fromkeys(keys) if not self.store.has(k)]
        extra = int(sum(n_rotations(int(k)) - 1 for k in self.dataset.n_options))
        rot = [k for k in dict.fromkeys(rotated) if not self.store.has(order_name(k))]
        return len(todo) * len(self.dataset) + len(rot) * extra

    def attach_progress(self, progress: Any) -> None:
        """Report each scored batch to ``progress`` (a :class:`benchc.suite.progress.RunProgress`
        or None); closed by :meth:`stop_prefetch`."""
        self._progress = progress
        self.progress = progress.update if progress is not None else None

    def notes(self) -> list[str]:
        """The summary's repair line (damaged stored files this run recomputed) and throughput
        line (queries scored by this process, when any)."""
        repaired = self.store.repair_note()
        out = [repaired] if repaired else []
        out += [self.route_note] if self.route_note else []
        if not self.scored_queries or self.scoring_s <= 0:
            return out
        rate = self.scored_queries / self.scoring_s
        out.append(
            f"throughput: {self.scored_queries} queries in {self.scoring_s:.1f} s "
            f"({rate:.1f} queries/s, {'pipelined' if self.pipelined else 'in sequence'})"
        )
        return out

    def _read(self, key: str, start: int, stop: int) -> tuple[list[np.ndarray], list]:
        """Rows ``start:stop`` under ``key``: the images, and each one's PNG file bytes when it
        was read from the corruption cache (``None`` otherwise)."""
        images, files, crcs = [], [], []
        encoded: dict[str, bytes] = {}
        pixel_crcs: dict[str, str] | None = {} if self.backend.reads_files else None
        for _, by_cond in iter_materialize(
            self._items(start, stop),
            [key],
            image_size=self.image_size,
            seed=self.cfg.seed,
            cache=self.cache,
            workers=self.corruption_workers,
            encoded=encoded,
            read_threads=1 if self.backend.local_cpu else READ_THREADS,
            pixel_crcs=pixel_crcs,
        ):
            images.append(by_cond[key])
            files.append(encoded.get(key))
            crcs.append(pixel_crcs.get(key) if pixel_crcs is not None else None)
        if key == spec.CLEAN and self.backend.reads_files:
            files, crcs = self.clean_files(start, stop)
        return images, (files, crcs)

    def clean_files(self, start: int, stop: int) -> tuple[list[bytes], list[str]]:
        """Rows ``start:stop``'s prepared images as the PNG files a server backend sends, and
        their pixels' CRC-32: stored on the corruption cache by the first run that sent them
        (:class:`~benchc.corruptions.cache.PreparedKey`), so a later run encodes none."""
        files, crcs = [], []
        for array in self.prepared(start, stop):
            data, crc = self.cache.file_of(PreparedKey(known_hash(array)), array)
            files.append(data)
            crcs.append(crc)
        return files, crcs

    def start_prefetch(self, keys: Sequence[str]) -> None:
        """Warm the corruption cache for ``keys`` in a background thread, condition by
        condition in the order the cells will run.

        On a cold cache this overlaps the corruption pool with the model instead of
        alternating them (the model waits less on each cell). Best effort: anything the
        prefetch has not reached is computed by :meth:`condition` itself.
        """
        self.planned = list(dict.fromkeys(keys))
        if self.pipelined:  # the first cell's first chunk is built while the session sets up
            first = next((k for k in self.planned if not self.store.has(k)), None)
            if first is not None:
                stop = min(len(self.dataset), self.chunk_rows)
                self.lookahead.schedule((first, 0, stop), self._builder(first, 0, stop))
        todo = [k for k in self.planned if k != spec.CLEAN and not self.store.has(k)]
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
                        keep=False,  # fill only: a warm entry is not read (and decoded) here
                    ):
                        if self._stop_prefetch.is_set():
                            return
            except Exception:  # the main thread recomputes, and reports any real error
                return

        self._prefetcher = threading.Thread(target=work, name="benchc-prefetch", daemon=True)
        self._prefetcher.start()

    def stop_prefetch(self) -> None:
        self.lookahead.close()
        if self._progress is not None:
            self._progress.close()
            self.attach_progress(None)
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
        require_answered(
            clean, cube, self.dataset.n_options, self.dataset.ids, corruptions, severities
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
    def vsi_inputs(self, start: int, stop: int) -> VSIInputs:
        """Rows ``start:stop``'s clean, region-blurred and whole-blurred images (a fallback row's
        region blur is its whole blur: made once). Pipelined, the next chunk's are made in a
        background thread while this one is scored (the blurs are ~4 ms per image each)."""
        pending = self._vsi_ahead.pop((start, stop), None)
        inputs = pending.result() if pending is not None else self._vsi_inputs(start, stop)
        n = len(self.dataset)
        if self.pipelined and stop < n:
            nxt = (stop, min(n, stop + self.chunk_rows))
            if nxt not in self._vsi_ahead:
                self._vsi_ahead[nxt] = self._vsi_pool.submit(self._vsi_inputs, *nxt)
        return inputs

    def _vsi_inputs(self, start: int, stop: int) -> VSIInputs:
        clean = self.prepared(start, stop)
        blurred, located, fallback, blurred_png = self._blurred(start, stop)
        whole, whole_png = [], []
        for a, b, png, fell in zip(clean, blurred, blurred_png, fallback, strict=True):
            w, w_png = (b, png) if fell else self._blur(a, None)
            whole.append(w)
            whole_png.append(w_png)
        clean_png = self.clean_files(start, stop) if self.backend.reads_files else None
        blurred_png, whole_png = _columns(blurred_png), _columns(whole_png)
        return VSIInputs(
            clean, blurred, located, fallback, whole, blurred_png, whole_png, clean_png
        )

    def _blur(
        self, image: np.ndarray, region: Region | None
    ) -> tuple[np.ndarray | None, bytes | FileAndCrc | None]:
        """One cached blur of a prepared image: its pixels and PNG file bytes, or, for a
        backend that sends files, no pixels and ``(file bytes, pixels' CRC-32)``."""
        if self.backend.reads_files:
            return None, cached_blur_file(image, region, self.cache, sigma=spec.VSI_SIGMA)
        return cached_blur(image, region, self.cache, sigma=spec.VSI_SIGMA)

    @cached_property
    def _vsi_pool(self) -> ThreadPoolExecutor:
        return ThreadPoolExecutor(1, thread_name_prefix="benchc-vsi-ahead")

    def drop_vsi_ahead(self) -> None:
        """Forget the VSI inputs made ahead (a failed or finished VSI computation)."""
        for future in self._vsi_ahead.values():
            if not future.cancel():
                future.exception()
        self._vsi_ahead.clear()

    def prepared(self, start: int, stop: int) -> list[np.ndarray]:
        """Clean images at the run's image size (what the corruptions start from)."""
        return [self._originals[i] for i in range(start, stop)]

    def blurred(self, start: int, stop: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
        """Region-blurred images (docs/spec.md §5), and bool arrays marking regions found by the
        locator and whole-image fallbacks (no annotation and no located region)."""
        return self._blurred(start, stop)[:3]

    def _blurred(
        self, start: int, stop: int
    ) -> tuple[list[np.ndarray | None], np.ndarray, np.ndarray, list]:
        """:meth:`blurred` and each image's file as :meth:`_blur` gives it: blurs are read from
        the corruption cache when any earlier run made them, else made and stored there."""
        n = stop - start
        images, located, fallback = [], np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        files: list = []
        for offset, (i, array) in enumerate(
            zip(range(start, stop), self.prepared(start, stop), strict=True)
        ):
            region = self.dataset[i].region
            if region is None and self.locator is not None:
                original = self.original(i)
                src = original.size
                region = self.locator(original)
                located[offset] = region is not None
            elif region is not None:  # the annotation's frame: the header says it, no decoding
                src = self.dataset[i].image().size
            if region is None:
                fallback[offset] = True
            else:
                dst = (array.shape[1], array.shape[0])
                region = scale_region(region, src, dst)
            image, png = self._blur(array, region)
            images.append(image)
            files.append(png)
        return images, located, fallback, files


#: One cached image as a files-only backend gets it: the file's bytes and its pixels' CRC-32.
FileAndCrc = tuple[bytes, str]
#: Rows of such files: ``(bytes per row, CRC-32 per row)``.
FileRows = tuple[list[bytes], list[str]]
#: Each row's PNG file bytes (``None`` where none), or, for a files-only backend, FileRows.
Encoded = list[bytes | None] | FileRows


def _columns(rows: list) -> Encoded:
    """Rows of files as :meth:`SuiteRun._queries` takes them: each row's PNG file bytes as
    they are, or rows of ``(bytes, CRC-32)`` (a files-only backend's) as FileRows."""
    if rows and isinstance(rows[0], tuple):
        return [f for f, _ in rows], [c for _, c in rows]
    return rows


class VSIInputs(NamedTuple):
    """One VSI chunk's images: clean, region-blurred (fallbacks marked), whole-blurred.

    For a backend that sends files (:attr:`Backend.reads_files`) the blurred images are
    ``None`` (never decoded) and each ``*_png`` is ``(file bytes, pixels' CRC-32)`` lists;
    else ``*_png`` holds each image's PNG file bytes on the corruption cache."""

    clean: list[np.ndarray]
    blurred: list[np.ndarray | None]
    located: np.ndarray
    fallback: np.ndarray
    whole: list[np.ndarray | None]
    blurred_png: Encoded | None = None
    whole_png: Encoded | None = None
    #: The clean images' files for a backend that sends files (:meth:`SuiteRun.clean_files`).
    clean_png: FileRows | None = None


#: Bytes of prepared images a run keeps (least recently used dropped first): at 448 px about
#: 1,700 images; the decoded originals are never kept (849 photos: 3.95 GB per process).
ORIGINALS_BUDGET = 1 << 30


class PreparedImages:
    """Each sample's prepared image (RGB uint8 at the run's size), made once and kept within a
    bytes budget: re-preparing the original for every condition was 8.9 ms of 18.5 per query
    (docs/guides/gpu.md). Thread-safe (the pipeline's threads read it)."""

    def __init__(self, run: SuiteRun, budget: int) -> None:
        self.run = run
        self.budget = budget
        self.bytes = 0
        self._kept: OrderedDict[int, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __getitem__(self, i: int) -> np.ndarray:
        with self._lock:
            hit = self._kept.get(i)
            if hit is not None:
                self._kept.move_to_end(i)
                return hit
        sample = self.run.dataset[i]
        array = prepare(self.run.original(i), self.run.image_size, what=f"sample {sample.id!r}")
        remember_hash(array)  # read-only (every condition shares it), hashed once
        with self._lock:
            if i not in self._kept:
                self._kept[i] = array
                self.bytes += array.nbytes
            while self.bytes > self.budget and len(self._kept) > 1:
                _, old = self._kept.popitem(last=False)
                self.bytes -= old.nbytes
        return array


def _prepare_workers(backend: Backend) -> int:
    """Threads preparing batches ahead: the backend's own processor workers when it has some
    (they wait on processes, so several batches are in flight), else one."""
    return max(1, int(getattr(backend, "processor_workers", 0) or 1))


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
