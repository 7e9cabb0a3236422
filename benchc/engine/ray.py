"""The grid on a Ray cluster: one actor per model replica, the driver the store's only writer.

Why Ray Core: an actor keeps a loaded model across chunks and is restarted when its process
dies, and ``ray.wait`` lets the driver notice a lost chunk instead of hanging on it (one dead
rank hangs torchrun/accelerate; Ray Data would form its own batches, and a chunk is the unit of
determinism). Each actor computes chunks with :meth:`SuiteRun.compute_chunk`, the function a
single process calls, so its bytes are that process's on the same device class.

The driver (the pytest process of ``--executor=ray``) loads no weights: it learns the model's
name, fingerprint, run key and device class from the actors, refuses actors that disagree,
leases the missing chunks in short runs per entry (:class:`benchc.engine.leases.LeaseQueue`),
saves each chunk as it comes back (atomic write with checksum) and assembles finished entries.
A dead actor's unreturned chunks go back to the queue and are counted as redone; a killed driver
rerun with the same command resumes from the store. An out-of-memory error fails the run with
the batch size that fits: a chunk is never stored batched differently from its run key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from benchc.engine import EngineError
from benchc.engine.devices import agreed, describe, device_class
from benchc.engine.leases import ChunkRef, LeaseQueue
from benchc.results import RunKey, StoreError

if TYPE_CHECKING:
    from benchc.suite.config import SuiteConfig
    from benchc.suite.run import SuiteRun
    from benchc.suite.session import SuiteSession

#: Seconds one ``ray.wait`` blocks before the driver looks around (stalls, actors to check).
POLL_S = 0.5
#: Seconds without any chunk or report back before the run stops (``--lock-timeout`` sets it).
STALL_S = 600.0
#: Chunks of one entry leased to an actor at a time (queued on it: it never waits for the next).
RUN_LENGTH = 2
#: Times Ray restarts a dead actor (a restarted actor reloads the model).
MAX_RESTARTS = 4


class ChunkOOM(EngineError):
    """A chunk ran out of device memory: the run's batch size does not fit this device."""


def unavailable() -> str | None:
    """Why ``--executor=ray`` cannot run here (Ray is not installed), or None."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        return 'ray needs Ray installed: pip install "benchc[ray]"'
    return None


@contextmanager
def executor(state: SuiteSession, *, vsi: bool) -> Iterator[Callable[[dict], None]]:
    """The ``ray`` executor (entry point of ``benchc.executors``): a Ray cluster's actors load
    the model and compute the missing chunks; yields what fills the entries the cases read."""
    from benchc.suite.session import LoadError

    if state.cfg.worker_id is not None:
        raise LoadError("--executor=ray: the cluster's actors are the parallelism; drop -n")
    with Cluster.start(state, vsi=vsi) as cluster:
        yield cluster.fill


executor.unavailable = unavailable  # type: ignore[attr-defined]


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise EngineError('--executor=ray needs Ray: pip install "benchc[ray]"') from None
    return ray


class ChunkWorker:
    """One model replica (a Ray actor): loads the model once, computes chunks on request."""

    def __init__(self, cfg: SuiteConfig, index: int) -> None:
        from benchc.suite.session import SuiteSession

        self.index = index
        own = replace(cfg, executor="local", worker_id=f"ray{index}", progress="off")
        self.state = SuiteSession(own)
        self.state.record = False  # the driver is the store's only writer
        self.state.check_model_inputs()  # loads the model
        self.device = device_class(self.state.backend)
        self.state.device_class = describe(self.device)

    def _run(self, tag: str) -> SuiteRun:
        return self.state.run if tag == "grid" else self.state.vsi_run

    def describe(self, tags: Sequence[str]) -> dict[str, Any]:
        """Who this actor is: device class, run key and rows per run, the model's facts."""
        import ray

        from benchc.provenance import environment

        backend = self.state.backend
        runs = {tag: self._run(tag) for tag in tags}
        return {
            "device_class": self.device,
            "pid": os.getpid(),
            "node": ray.get_runtime_context().get_node_id(),
            "keys": {tag: asdict(run.key) for tag, run in runs.items()},
            "rows": {tag: len(run.dataset) for tag, run in runs.items()},
            "backend": {
                "name": backend.name,
                "fingerprint": backend.fingerprint,
                "batch_size": self.state.run.batch_size,
                "capabilities": asdict(backend.capabilities),
                "environment": environment(backend),
            },
        }

    def compute(self, chunk: ChunkRef) -> tuple[str, dict[str, np.ndarray]]:
        """``chunk``'s arrays and the digest of the run key they were computed under."""
        run = self._run(chunk.run)
        where = f"{chunk} on actor {self.index} ({describe(self.device)})"
        fix = "a smaller --batch-size (a new run key: its results are computed anew)"
        try:
            arrays = run.compute_chunk(chunk.name, chunk.start, chunk.stop)
        except Exception as exc:
            if type(exc).__name__ == "OutOfMemoryError":  # torch's, without importing torch
                raise ChunkOOM(
                    f"{where}: out of device memory at batch size {run.batch_size}; rerun with "
                    f"{fix}"
                ) from None
            raise
        fitted = getattr(self.state.backend, "max_rows", None)
        if fitted is not None:  # the backend split a batch after an OOM: not this run's batches
            raise ChunkOOM(
                f"{where}: batch size {run.batch_size} ran out of device memory, {fitted} fit; "
                f"rerun with --batch-size={fitted}, {fix}"
            )
        return run.key.digest(), arrays


class Cluster:
    """The driver's side: the actors, their agreed report, and :meth:`fill`."""

    def __init__(self, state: SuiteSession, ray: Any) -> None:
        self.state = state
        self.ray = ray
        cfg = state.cfg
        self.stall_s = cfg.lock_timeout or STALL_S
        self.actors: list[Any] = []
        self.reports: list[dict[str, Any]] = []
        #: Called with (actor index, chunk) after each chunk is stored (tests kill actors here).
        self.on_result: Callable[[int, ChunkRef], None] | None = None
        self.queue: LeaseQueue | None = None
        self.scored = 0
        self.already = 0
        self.seconds = 0.0
        self._groups: list[Any] = []

    # -- starting ---------------------------------------------------------------------------
    @classmethod
    @contextmanager
    def start(cls, state: SuiteSession, *, vsi: bool) -> Iterator[Cluster]:
        """Connect (``--ray-address``, ``$RAY_ADDRESS``) or start a local cluster, start the
        actors and check their reports; the actors end with the block (and a cluster started
        here with them)."""
        ray = import_ray()
        cfg = state.cfg
        started = False
        if not ray.is_initialized():
            quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": "ERROR"}
            if cfg.ray_address or os.environ.get("RAY_ADDRESS"):
                ray.init(address=cfg.ray_address, **quiet)
            else:  # one CPU more than the actors take: a restarted actor always has room
                actors = cfg.ray_actors or max(1, (os.cpu_count() or 2) - 1)
                ray.init(num_cpus=max(os.cpu_count() or 1, actors + 1), **quiet)
            started = True
        cluster = cls(state, ray)
        try:
            cluster.launch(["grid", *(["vsi"] if vsi else [])])
            yield cluster
        finally:
            cluster.close()
            if started:
                ray.shutdown()

    def launch(self, tags: Sequence[str]) -> None:
        ray, cfg = self.ray, self.state.cfg
        resources = ray.cluster_resources()
        gpus = cfg.ray_gpus if cfg.ray_gpus is not None else int(resources.get("GPU", 0) >= 1)
        if cfg.ray_actors:
            count = cfg.ray_actors
        elif gpus:
            count = int(resources.get("GPU", 0)) // gpus
        else:
            count = max(1, int(resources.get("CPU", 1)) - 1)
        if count < 1:
            raise EngineError(
                f"the Ray cluster holds {resources.get('GPU', 0):g} GPUs, a replica needs {gpus}"
            )
        remote = ray.remote(ChunkWorker)
        for i in range(count):
            options: dict[str, Any] = {
                "num_cpus": 1,
                "num_gpus": gpus,
                "max_restarts": MAX_RESTARTS,
                "max_task_retries": 0,  # the driver re-leases a lost chunk itself
            }
            if gpus > 1:
                options["scheduling_strategy"] = self._packed(gpus)
            self.actors.append(remote.options(**options).remote(cfg, i))
        self.tags = list(tags)
        self.reports = self._collect([a.describe.remote(self.tags) for a in self.actors])
        self._adopt()

    def _packed(self, gpus: int) -> Any:
        """A placement group reserving one replica's ``gpus`` GPUs on one node before its model
        loads (STRICT_PACK), for a ``device_map`` spreading the replica over them."""
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        group = placement_group([{"CPU": 1, "GPU": gpus}], strategy="STRICT_PACK")
        ready, _ = self.ray.wait([group.ready()], timeout=self.stall_s)
        if not ready:
            raise EngineError(f"no node of the Ray cluster has {gpus} free GPUs for a replica")
        self._groups.append(group)
        return PlacementGroupSchedulingStrategy(group, placement_group_capture_child_tasks=True)

    def _collect(self, refs: list[Any]) -> list[dict[str, Any]]:
        """The actors' reports (loading a model takes a while): never a blocking get."""
        _, pending = self.ray.wait(refs, num_returns=len(refs), timeout=self.stall_s)
        if pending:
            raise EngineError(
                f"{len(pending)} of {len(refs)} actors did not start within {self.stall_s:.0f} s "
                "(not enough free CPUs/GPUs? `ray status` shows what waits)"
            )
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(self.ray.get(ref, timeout=self.stall_s))
            except self.ray.exceptions.RayError as err:
                raise EngineError(f"actor {i} could not start: {_cause(err)}") from None
        return out

    def _adopt(self) -> None:
        """Refuse disagreeing actors; take their run keys and model facts (no weights here)."""
        from benchc.engine.stored import StandIn

        state = self.state
        dc = agreed(self.reports, "device_class", "device class")
        keys = {
            tag: agreed([{"key": r["keys"][tag]} for r in self.reports], "key", "run key")
            for tag in self.tags
        }
        facts = agreed(self.reports, "backend", "model")
        for tag, key in keys.items():
            run_key = RunKey(**key)
            dataset = state.dataset if tag == "grid" else _vsi_dataset(state)
            if run_key.dataset_fingerprint != dataset.fingerprint or self.reports[0]["rows"][
                tag
            ] != len(dataset):
                raise EngineError(
                    f"the actors read another {tag} dataset than the driver ({dataset.name}): "
                    "is --dataset the same path on every node?"
                )
            state.run_keys[run_key.dataset_fingerprint] = run_key
        state.device_class = describe(dc)
        state._backend = StandIn(
            name=facts["name"],
            fingerprint=facts["fingerprint"],
            batch_size=facts["batch_size"],
            capabilities=facts["capabilities"],
            environment=facts["environment"],
            where="the Ray cluster",
        )

    # -- computing ----------------------------------------------------------------------------
    def fill(self, entries: Mapping[str, Sequence[str]]) -> None:
        """Compute every missing chunk of ``entries`` (run tag -> names) on the actors, save
        each as it comes back, assemble the finished entries."""
        state = self.state
        runs = {tag: (state.run if tag == "grid" else state.vsi_run) for tag in entries}
        chunks: list[ChunkRef] = []
        for tag, names in entries.items():
            run = runs[tag]
            n = len(run.dataset)
            for name in dict.fromkeys(names):
                bounds = run.chunks(name)
                missing = run.store.missing_chunks(name, n, run.chunk_rows)
                self.already += len(bounds) - len(missing)
                chunks += [ChunkRef(tag, name, a, b) for a, b in missing]
                if not missing:
                    run.store.assemble(name, n, run.chunk_rows)  # parts all there: merged
        self.queue = queue = LeaseQueue(chunks, run_length=RUN_LENGTH)
        began = time.perf_counter()
        self._drive(queue, runs)
        self.seconds += time.perf_counter() - began
        for tag, run in runs.items():
            if any(c.run == tag for c in chunks):
                run.note_access()
        state.backend.lines.append(self.summary())  # type: ignore[attr-defined]

    def _drive(self, queue: LeaseQueue, runs: Mapping[str, SuiteRun]) -> None:
        ray = self.ray
        pending: dict[Any, tuple[int, ChunkRef]] = {}
        checking: dict[Any, int] = {}  # a report asked of an actor that lost a chunk
        live = set(range(len(self.actors)))
        restarting: dict[int, float] = {}  # since when an actor that lost chunks is away
        last = time.monotonic()
        while not queue.finished:
            busy = {i for i, _ in pending.values()} | set(checking.values())
            for i in sorted(live - busy):
                for chunk in queue.lease(i):
                    pending[self.actors[i].compute.remote(chunk)] = (i, chunk)
            refs = list(pending) + list(checking)
            if not refs:
                raise EngineError("no live actor is left to compute the missing chunks")
            ready, _ = ray.wait(refs, num_returns=1, timeout=POLL_S)
            if not ready:
                if time.monotonic() - last > self.stall_s:
                    raise EngineError(
                        f"no chunk came back in {self.stall_s:.0f} s ({len(pending)} in flight on "
                        f"{len(live)} actors); `ray status` shows whether they are placed"
                    )
                continue
            last = time.monotonic()
            for ref in ready:
                if ref in checking:
                    i = checking.pop(ref)
                    answer = self._checked(i, ref)
                    since = restarting.setdefault(i, time.monotonic())
                    if answer == "dead" or time.monotonic() - since > self.stall_s:
                        live.discard(i)  # restarts used up, or it never came back
                    elif answer == "restarting":  # reloading its model: ask again shortly
                        time.sleep(POLL_S / 5)
                        checking[self.actors[i].describe.remote(self.tags)] = i
                    else:
                        restarting.pop(i, None)
                    continue
                i, chunk = pending.pop(ref)
                try:
                    digest, arrays = ray.get(ref, timeout=self.stall_s)
                except ray.exceptions.RayTaskError as err:  # the chunk's own error: stop
                    raise EngineError(_cause(err)) from None
                except ray.exceptions.RayError:  # the actor died: its chunk is leased again
                    queue.give_back(chunk)
                    if i not in checking.values():
                        checking[self.actors[i].describe.remote(self.tags)] = i
                    continue
                self._store(runs[chunk.run], chunk, digest, arrays, queue)
                if self.on_result is not None:
                    self.on_result(i, chunk)

    def _checked(self, i: int, ref: Any) -> str:
        """``ok`` once actor ``i``, which lost a chunk, answers again (a restarted actor must
        still be of the run's device class and key), ``restarting`` while Ray restarts it,
        ``dead`` when its restarts are used up."""
        ray = self.ray
        try:
            report = ray.get(ref, timeout=self.stall_s)
        except ray.exceptions.ActorUnavailableError:
            return "restarting"
        except ray.exceptions.RayError:
            return "dead"
        agreed([self.reports[0], report], "device_class", "device class")
        agreed([self.reports[0], report], "keys", "run key")
        return "ok"

    def _store(
        self,
        run: SuiteRun,
        chunk: ChunkRef,
        digest: str,
        arrays: dict[str, np.ndarray],
        queue: LeaseQueue,
    ) -> None:
        if digest != run.key.digest():
            raise EngineError(f"{chunk} came back under another run key than {run.key.dirname()}")
        rows = {len(a) for a in arrays.values()}
        if rows != {chunk.stop - chunk.start}:
            raise StoreError(f"{chunk}: the actor returned {sorted(rows)} rows")
        if not queue.done(chunk):
            return  # a duplicate: those bytes are stored already
        run.store.save_part(chunk.name, chunk.start, arrays)
        rows = chunk.stop - chunk.start
        # a rotated entry's row holds its sample's other orders: one query each
        offsets = arrays.get("offsets")
        self.scored += rows if offsets is None else int((offsets >= 0).sum()) - rows
        if queue.left(chunk.run, chunk.name) == 0:
            run.store.assemble(chunk.name, len(run.dataset), run.chunk_rows)

    def summary(self) -> str:
        """The run summary's line: what the cluster computed, redid and found stored."""
        queue = self.queue
        stored = queue.stored if queue else 0
        rate = f", {self.scored / self.seconds:.1f} queries/s" if self.seconds > 0 else ""
        return (
            f"ray: {stored} chunks ({self.scored} queries) over {len(self.actors)} "
            f"actor{'s' if len(self.actors) != 1 else ''} "
            f"[{self.state.device_class}] in {self.seconds:.1f} s{rate}; "
            f"{queue.redone if queue else 0} redone, {queue.duplicates if queue else 0} "
            f"duplicates, {self.already} already stored"
        )

    def close(self) -> None:
        for actor in self.actors:
            try:
                self.ray.kill(actor)
            except Exception:  # already gone
                pass
        self.actors = []
        for group in self._groups:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(group)
        self._groups = []


def _vsi_dataset(state: SuiteSession) -> Any:
    from benchc.engine.stored import vsi_dataset

    return vsi_dataset(state)


def _cause(err: Exception) -> str:
    """The first line of what failed inside an actor (not Ray's wrapping traceback)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        text = str(cause).strip().splitlines()
        return text[0] if text else type(cause).__name__
    lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
    errors = [ln for ln in lines if "Error" in ln.split(":")[0]]
    return (errors or lines or [type(err).__name__])[-1]
