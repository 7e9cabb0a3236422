"""Scale-out: the grid over 1 and 2 Ray actors against one process, a virtual device each.

The "virtual device" of benchmarks/bench_pipeline.py: the embedded model (``HFBackend``) with
its network replaced by a wait of ``batch / rate`` seconds that releases the GIL as a CUDA sync
does (``--rate`` queries/s per device); everything else is real -- the corruption cache (warm),
the chat template, the processor, letter logits, and for the actors the whole engine: leases,
``ray.wait``, the chunks' arrays sent back to the driver, its atomic writes and assembly.

Reference, measured in the same run: this process computing the same entries through
``SuiteRun.condition`` on one virtual device (the single-process path). Printed per path: wall
seconds and queries/s (medians of ``--repeat`` interleaved runs; actors started and models
loaded before the clock), and derived: the speed-up of 2 actors over 1, the scaling efficiency
(speed-up / 2), and the chunk overhead per query (1 actor's wall time minus the single
process's, per query: what leasing, transfer and the driver's writes add).

    python benchmarks/bench_scaleout.py [--rate 45] [--batch 8] [--conditions 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
#: Queries/s of each virtual device (read by the actors' backends: set before Ray starts).
RATE_ENV = "BENCHC_BENCH_RATE"
CONDITIONS = ["fog-1", "gaussian_noise-1", "contrast-3", "pixelate-2", "saturate-3", "snow-2"]


def _backend_class():
    from bench_pipeline import VirtualDevice

    from benchc.models.hf import HFBackend
    from benchc.suite.config import DEFAULT_MODEL

    class VirtualTiny(HFBackend):
        """The embedded model whose network is a virtual device (``--model=bench_scaleout:
        VirtualTiny``)."""

        def __init__(self, batch_size: int = 8, **kwargs) -> None:
            super().__init__(DEFAULT_MODEL, batch_size=batch_size)
            self.model = VirtualDevice(len(self.tokenizer), float(os.environ[RATE_ENV]))

        @property
        def local_cpu(self) -> bool:  # the model runs "elsewhere": the suite reads ahead
            return False

    return VirtualTiny


def __getattr__(name: str):  # the registry imports ``bench_scaleout:VirtualTiny``
    if name == "VirtualTiny":
        return _backend_class()
    raise AttributeError(name)


def config(results: Path, cache: Path, args: argparse.Namespace, **extra):
    from benchc.suite.config import SuiteConfig

    return SuiteConfig(
        model="bench_scaleout:VirtualTiny",
        batch_size=args.batch,
        results_dir=results,
        cache_dir=cache,
        corruptions=tuple(c.split("-")[0] for c in CONDITIONS[: args.conditions]),
        severities=(1, 2, 3),
        **extra,
    )


def entries(args: argparse.Namespace) -> list[str]:
    return ["clean", *CONDITIONS[: args.conditions]]


def single(cache: Path, args: argparse.Namespace) -> tuple[float, int]:
    """The single-process path: (wall seconds, queries)."""
    from benchc.suite.session import SuiteSession

    state = SuiteSession(config(Path(tempfile.mkdtemp()), cache, args))
    run = state.run
    began = time.perf_counter()
    for key in entries(args):
        run.condition(key)
    wall = time.perf_counter() - began
    run.stop_prefetch()
    return wall, len(entries(args)) * len(run.dataset)


def actors(n: int, cache: Path, args: argparse.Namespace) -> tuple[float, int, str]:
    """``n`` actors: (wall seconds of the fill, queries, the summary line)."""
    from benchc.engine.ray import Cluster
    from benchc.suite.session import SuiteSession

    cfg = config(Path(tempfile.mkdtemp()), cache, args, executor="ray", ray_actors=n)
    state = SuiteSession(cfg)
    with Cluster.start(state, vsi=False) as cluster:  # actors up, models loaded: off the clock
        began = time.perf_counter()
        cluster.fill({"grid": entries(args)})
        wall = time.perf_counter() - began
        return wall, cluster.scored, state.backend.notes()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=45.0, help="queries/s per virtual device")
    parser.add_argument("--batch", type=int, default=8, help="batch size (chunk: 4 batches)")
    parser.add_argument("--conditions", type=int, default=4, help="conditions besides clean")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ[RATE_ENV] = str(args.rate)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), os.environ.get(
        "PYTHONPATH", "")])  # fmt: skip
    sys.path[:0] = [str(HERE), str(ROOT)]
    import ray
    import torch

    torch.set_num_threads(1)
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    cache = Path(tempfile.mkdtemp())
    single(cache, args)  # warms the corruption cache; not measured
    load = [os.getloadavg()[0]]
    rows: dict[str, list[float]] = {"single process": [], "1 actor": [], "2 actors": []}
    queries = 0
    notes = {}
    for _ in range(args.repeat):
        wall, queries = single(cache, args)
        rows["single process"].append(wall)
        for n, name in ((1, "1 actor"), (2, "2 actors")):
            wall, scored, note = actors(n, cache, args)
            assert scored == queries, (scored, queries)
            rows[name].append(wall)
            notes[name] = note
    load.append(os.getloadavg()[0])
    ray.shutdown()
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(f"bench_scaleout: {queries} queries ({len(entries(args))} entries), batch "
          f"{args.batch}, virtual device {args.rate:g} queries/s each, {os.cpu_count()} CPUs, "
          f"load {load[0]:.1f} -> {load[1]:.1f}, median of {args.repeat}")  # fmt: skip
    for name, wall in med.items():
        spread = ", ".join(f"{w:.2f}" for w in rows[name])
        print(f"  {name:15s} {wall:7.2f} s  {queries / wall:6.1f} queries/s  ({spread})")
    speedup = med["1 actor"] / med["2 actors"]
    print(f"  2 actors / 1 actor: speed-up {speedup:.2f}, scaling efficiency {speedup / 2:.2f}")
    print(f"  1 actor / single process: {med['single process'] / med['1 actor']:.2f} of its rate")
    overhead = 1000 * (med["1 actor"] - med["single process"]) / queries
    print(f"  chunk overhead per query (1 actor - single process): {overhead:.2f} ms")
    print(f"  device-bound ceiling: {args.rate:g} queries/s per device")
    for name, note in notes.items():
        print(f"  {name}: {note}")


if __name__ == "__main__":
    main()
