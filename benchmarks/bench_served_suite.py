"""The served path through the whole suite at real image sizes, with the CPU split by process.

A loopback OpenAI-compatible server that answers at once (``bench_client.py``'s, in its own
process) stands in for a GPU fleet. The whole suite (``pytest benchc_tests/suite``: every cell,
family, model and VSI case of the chosen corruptions) runs against it from the same corruption
cache: a warm-up run records thresholds into a temporary folder (and fills the cache); the
measured runs check against them, as a release gate's CI does:

- requests/s end to end (pytest's start-up, collection, metrics, gates included);
- benchc's own CPU per request: user + system of the pytest process tree (``RUSAGE_CHILDREN``
  of this driver: pytest and every process it waited for);
- the server's CPU per request, apart (``/proc/<pid>/stat`` of the server process).

Images: by default real photographs, not synthetic squares. Nothing is downloaded: the
photographs bundled with installed packages (scikit-learn's ``china.jpg`` and ``flower.jpg``,
matplotlib's ``grace_hopper.jpg``, and scikit-image's photographs when it is installed) are cut
into ``--samples`` random crops (aspect 0.5-2, 640 px on the longer side, JPEG quality 92), each
given a synthetic testbed question and its region scaled onto the crop; the suite prepares them
at ``--image-size``. The same set is the VSI set. ``--dataset`` (and ``--vsi-dataset``) run on
other data instead.

Python writes bytecode for the suite's processes (as on a CI machine; a sandbox that sets
``PYTHONDONTWRITEBYTECODE`` recompiles benchc on every start, about 1 s: ``--no-bytecode`` keeps
that). ``--workers N`` runs the measured suites with ``pytest -n N`` (pytest-xdist; the warm-up
records in one process). Requests are counted by the server.

``--latency-ms L`` makes the server answer each request L ms after it arrived (a replica's
queue and prefill: timers in its event loop, no CPU), so the client's concurrency is what is
measured too; ``--model-args`` passes the suite's (e.g. ``concurrency=64``).

``--reference COMMIT`` runs the same measurement with that commit's benchc (checked out with
``git worktree add`` into a temporary folder) in the same invocation, interleaved, and prints
the ratios.

    python benchmarks/bench_served_suite.py --image-size 448 [--reference HEAD~1] [--repeat 1]
    python benchmarks/bench_served_suite.py --latency-ms 200 --model-args concurrency=96
"""

from __future__ import annotations

import argparse
import io
import multiprocessing as mp
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


# -- photographs -----------------------------------------------------------------------------
def photo_sources() -> list[tuple[str, object]]:
    """(name, RGB uint8 array) of every real photograph bundled with an installed package."""
    import numpy as np
    from PIL import Image

    out: list[tuple[str, object]] = []
    try:
        from sklearn.datasets import load_sample_images

        bunch = load_sample_images()
        for name, image in zip(bunch.filenames, bunch.images, strict=True):
            out.append((f"scikit-learn {Path(name).name}", np.asarray(image)[:, :, :3]))
    except ImportError:
        pass
    import matplotlib.cbook

    with matplotlib.cbook.get_sample_data("grace_hopper.jpg") as fh:
        out.append(("matplotlib grace_hopper.jpg", np.asarray(Image.open(fh).convert("RGB"))))
    try:
        import skimage.data

        for name in ("astronaut", "chelsea", "coffee", "rocket", "cat"):
            out.append((f"scikit-image {name}", getattr(skimage.data, name)()[:, :, :3]))
    except ImportError:
        pass
    return out


def make_photo_dataset(folder: Path, n: int, side: int = 640, seed: int = 0) -> list[str]:
    """A JSONL dataset of ``n`` samples whose images are crops of the bundled photographs
    (see the module docstring); returns the photographs' names."""
    from dataclasses import replace

    import numpy as np
    from PIL import Image

    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    sources = photo_sources()
    rng = np.random.default_rng(seed)
    samples = []
    for i, s in enumerate(generate(n, 3)):
        src = sources[i % len(sources)][1]
        h, w = src.shape[:2]
        aspect = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
        ch = min(h, int(w / aspect))
        cw = min(w, int(ch * aspect))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = Image.fromarray(np.ascontiguousarray(src[y : y + ch, x : x + cw]))
        scale = side / max(crop.size)
        crop = crop.resize((round(crop.width * scale), round(crop.height * scale)))
        buf = io.BytesIO()
        crop.save(buf, "JPEG", quality=92)
        meta = dict(s.meta)
        if "region" in meta:  # the question's region, scaled onto the photograph
            with Image.open(io.BytesIO(s.image_bytes)) as syn:
                sw, sh = syn.size
            x0, y0, x1, y1 = meta["region"]
            fx, fy = crop.width / sw, crop.height / sh
            x1, y1 = min(crop.width, int(x1 * fx) + 1), min(crop.height, int(y1 * fy) + 1)
            meta["region"] = [int(x0 * fx), int(y0 * fy), x1, y1]
        samples.append(replace(s, image_bytes=buf.getvalue(), meta=meta))
    save_jsonl(samples, folder)
    return [name for name, _ in sources]


# -- one measured suite run ------------------------------------------------------------------
def proc_cpu_s(pid: int) -> float:
    """User + system seconds of process ``pid`` so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def suite(
    checkout: Path,
    url: str,
    root: Path,
    tag: str,
    args,
    server_pid: int,
    thresholds: str,
    answered,
) -> dict:
    """One whole-suite run of ``checkout``'s benchc against ``url``: wall, requests, CPU.
    ``thresholds``: the folder it records into (``--snapshot-update``, the warm-up) or, given
    as ``check:FOLDER``, checks against (a release gate's run: what is measured).
    ``answered``: the server's request counter."""
    check = thresholds.startswith("check:")
    cmd = [sys.executable, "-m", "pytest", "benchc_tests/suite", "-q", "-p", "no:cacheprovider",
           f"--model=openai:bench@{url}", f"--dataset={args.dataset}",
           f"--vsi-dataset={args.vsi_dataset}", f"--image-size={args.image_size}",
           f"--corruptions={args.corruptions}", f"--results-dir={root / f'results-{tag}'}",
           f"--cache-dir={args.cache_dir or root / 'cache'}",
           f"--thresholds-dir={thresholds.removeprefix('check:')}",
           "--progress=off"]  # fmt: skip
    if args.model_args:
        cmd.append(f"--model-args={args.model_args}")
    if not check:
        cmd.append("--snapshot-update")  # in one process: workers would race on the files
    elif args.workers > 1:
        cmd += ["-n", str(args.workers)]
    if args.profile:
        cmd[1:1] = ["-m", "cProfile", "-o", str(root / f"{tag}.prof")]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    if not args.no_bytecode:  # as on a CI machine: imports read the .pyc files, not the sources
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    requests0 = answered.value
    cpu0, server0, began = children_cpu_s(), proc_cpu_s(server_pid), time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - began
    cpu, server = children_cpu_s() - cpu0, proc_cpu_s(server_pid) - server0
    n = answered.value - requests0  # counted by the server: every worker's requests
    out = done.stdout + done.stderr
    if done.returncode not in (0, 1) or n == 0:
        sys.exit(f"suite run failed ({done.returncode}):\n{out[-3000:]}")
    scored = sum(int(x) for x in re.findall(r"queries scored (\d+) by", out))
    if "-n" not in cmd and scored != n:  # one process: its own count must be the server's
        sys.exit(f"the suite says it scored {scored} queries; the server answered {n}")
    return {"wall": wall, "n": n, "rps": n / wall, "cpu_ms": 1000 * cpu / n,
            "server_ms": 1000 * server / n}  # fmt: skip


def checkout_ref(ref: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(into), ref],
                   check=True, capture_output=True)  # fmt: skip
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image-size", type=int, default=448)
    parser.add_argument("--dataset", default=None, help="default: the bundled photographs")
    parser.add_argument("--vsi-dataset", default=None, help="default: --dataset")
    parser.add_argument("--samples", type=int, default=100, help="photographs to cut")
    parser.add_argument("--corruptions", default="noise", help="the suite's --corruptions")
    parser.add_argument("--reference", default=None, help="also measure this commit's benchc")
    parser.add_argument("--repeat", type=int, default=1, help="measured runs per side")
    parser.add_argument("--profile", action="store_true", help="cProfile the measured runs")
    parser.add_argument("--cache-dir", default=None, help="a corruption cache to reuse")
    parser.add_argument("--workers", type=int, default=1, help="pytest -n (pytest-xdist)")
    parser.add_argument("--no-bytecode", action="store_true",
                        help="keep PYTHONDONTWRITEBYTECODE (each start recompiles)")  # fmt: skip
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="the server answers each request this long after it arrived "
                             "(a replica's queue and prefill); default 0: at once")  # fmt: skip
    parser.add_argument("--model-args", default="",
                        help="the suite's --model-args, e.g. concurrency=64")  # fmt: skip
    args = parser.parse_args()
    import bench_client

    ctx = mp.get_context("spawn")
    ports, answered = ctx.Queue(), ctx.Value("q", 0)
    server = ctx.Process(
        target=bench_client._serve, args=(ports, answered, args.latency_ms / 1000), daemon=True
    )
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}/v1"
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if args.dataset is None:
                names = make_photo_dataset(root / "photos", args.samples)
                args.dataset = str(root / "photos")
                print(f"dataset: {args.samples} crops of {len(names)} bundled photographs "
                      f"({', '.join(names)})")  # fmt: skip
            args.vsi_dataset = args.vsi_dataset or args.dataset
            sides = {"this checkout": ROOT}
            if args.reference:
                sides[f"reference {args.reference}"] = checkout_ref(args.reference, root / "ref")
            answers = f"{args.latency_ms:g} ms after each request" if args.latency_ms else "at once"
            print(f"cores {os.cpu_count()}, image size {args.image_size}, corruptions "
                  f"{args.corruptions}, pytest workers {args.workers}, bytecode "
                  f"{'off' if args.no_bytecode else 'written'}, load {os.getloadavg()[0]:.2f}, "
                  f"model args {args.model_args or '(defaults)'}, a loopback server answering "
                  f"{answers}"
                  " (its own process); measured: runs that check the thresholds the warm-up run "
                  "recorded")  # fmt: skip
            recorded = {}
            for k, (label, path) in enumerate(sides.items()):  # fills the cache; not measured
                recorded[label] = str(root / f"thresholds-{k}")
                suite(path, url, root, f"warm-{k}", args, server.pid, recorded[label], answered)
            got: dict[str, list[dict]] = {k: [] for k in sides}
            for r in range(args.repeat):
                for k, (label, path) in enumerate(sides.items()):
                    check = f"check:{recorded[label]}"
                    run = suite(path, url, root, f"m{r}-{k}", args, server.pid, check, answered)
                    got[label].append(run)
            print(f"{'side':<28} {'requests':>8} {'wall s':>7} {'requests/s':>10} "
                  f"{'benchc CPU ms/req':>18} {'server CPU ms/req':>18}")  # fmt: skip
            med = {}
            for label, runs in got.items():
                m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
                med[label] = m
                print(f"{label:<28} {m['n']:>8.0f} {m['wall']:>7.1f} {m['rps']:>10.1f} "
                      f"{m['cpu_ms']:>18.2f} {m['server_ms']:>18.2f}")  # fmt: skip
            if len(med) == 2:
                this, ref = med.values()
                print(f"{'this / reference':<28} {'':>8} {'':>7} {this['rps'] / ref['rps']:>10.2f} "
                      f"{this['cpu_ms'] / ref['cpu_ms']:>18.2f}")  # fmt: skip
            if args.profile:
                import pstats

                stats = pstats.Stats(str(root / "m0-0.prof"))
                stats.sort_stats("cumulative").print_stats(40)
            if args.reference:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                str(root / "ref")], check=False, capture_output=True)  # fmt: skip
    finally:
        server.terminate()
        server.join(5)


if __name__ == "__main__":
    main()
