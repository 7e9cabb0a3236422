"""The GPU path on CPUs: how busy a 7B model's device would be, today's path against the new one.

The "virtual device" (docs/guides/gpu.md): ``HFBackend`` with the network's forward replaced by
a wait of ``batch / rate`` seconds that releases the GIL as a CUDA sync does (45 queries/s: a
7B VLM at about 40 % of an H200's bf16 peak); everything else runs for real through
``SuiteRun.condition``: the corruption cache (warm), the prepared images, the chat template,
the image processor with the real checkpoint's settings, the dtype cast, letter logits, the
results store. Busy fraction = time waited on the device / wall time.

Both paths run in the same invocation, each in its own process: "today" imports ``benchc`` from
``--reference`` (a commit extracted with ``git archive``; default: main before the pipeline),
"new" from this checkout. Prints, per processor family, the busy fraction, queries/s, CPU ms
per query per stage and in all (``time.process_time``, every thread), the machine's load
average before and after, and the ratios new / today.

Processors: the real image-processor settings of Qwen2.5-VL-7B-Instruct (448-px images),
LLaVA-1.5 (CLIP-336, 576 image tokens), SmolVLM-Instruct and Idefics3-8B (image splitting into
384 / 364 px tiles); their tokenizers are the tiny BPE vocabularies of
``benchc.testing.dev.tiny_families`` (no real vocabulary is available offline; the text part is
~0.7 ms of Qwen's 4.3 ms per image). Images: the real photos bundled with scikit-image and
scikit-learn (10 photos, 300-1411 px), cropped to mixed aspect ratios and resized to 1600 px
(``--photo-side``), the size of the real photo sets the measured note used (640-2048 px).

    python benchmarks/bench_pipeline.py [--families qwen,llava,smolvlm,idefics3] [--samples 96]
                                        [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
#: main just before the pipeline (issue 23): "today's path".
DEFAULT_REFERENCE = "2edb5327558fcb1d23d31a3be2611c4598ddf4b5"
CONDITIONS = [
    "brightness-2",
    "contrast-3",
    "jpeg_compression-4",
    "gaussian_noise-1",
    "pixelate-2",
    "saturate-3",
]
#: Conditions of the full grid (clean + 19 corruptions x 5 severities), over which a run
#: spreads its once-per-sample work.
GRID = 96
FAMILIES = {
    # family: (tiny checkpoint, samples, conditions) -- tiling processors get fewer queries
    "qwen": ("qwen2_5_vl", None, 6),
    "llava": ("llava", None, 6),
    "smolvlm": ("smolvlm", 24, 1),
    "idefics3": ("idefics3", 24, 1),
}


# -- the real processor settings ----------------------------------------------------------------
def real_processor(family: str, tiny: object) -> object:
    """The checkpoint's image processor settings around the tiny checkpoint's tokenizer."""
    from benchc.models.processors import image_only

    tok, template = tiny.tokenizer, tiny.chat_template
    if family == "qwen":
        from transformers import Qwen2_5_VLProcessor
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import (
            Qwen2VLImageProcessorPil,
        )

        images = Qwen2VLImageProcessorPil(
            size={"shortest_edge": 3136, "longest_edge": 12845056},
            patch_size=14,
            temporal_patch_size=2,
            merge_size=2,
        )
        return image_only(Qwen2_5_VLProcessor)(
            image_processor=images, tokenizer=tok, chat_template=template
        )
    if family == "llava":
        from transformers import LlavaProcessor
        from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil

        images = CLIPImageProcessorPil(
            size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336}
        )
        return LlavaProcessor(
            image_processor=images,
            tokenizer=tok,
            chat_template=template,
            patch_size=14,
            vision_feature_select_strategy="default",
            num_additional_image_tokens=1,
        )
    if family in ("smolvlm", "idefics3"):
        if family == "smolvlm":
            from transformers import SmolVLMProcessor as cls
            from transformers.models.smolvlm.image_processing_pil_smolvlm import (
                SmolVLMImageProcessorPil as images_cls,
            )

            tile, seq = 384, 81
        else:
            from transformers import Idefics3Processor as cls
            from transformers.models.idefics3.image_processing_pil_idefics3 import (
                Idefics3ImageProcessorPil as images_cls,
            )

            tile, seq = 364, 169
        images = images_cls(
            size={"longest_edge": 4 * tile},
            max_image_size={"longest_edge": tile},
            do_image_splitting=True,
        )
        kwargs = {"video_processor": None} if family == "smolvlm" else {}
        return image_only(cls)(
            image_processor=images,
            tokenizer=tok,
            image_seq_len=seq,
            chat_template=template,
            **kwargs,
        )
    raise ValueError(f"unknown family {family!r}")


# -- the virtual device -------------------------------------------------------------------------
class VirtualDevice:
    """Stands in for the network: waits ``batch / rate`` s (GIL released), returns zero logits."""

    def __init__(self, vocab: int, rate: float) -> None:
        import torch

        self.torch, self.vocab, self.rate = torch, vocab, rate
        self.busy_s = 0.0
        self.queries = 0

    def __call__(self, **inputs):
        rows = inputs["input_ids"].shape[0]
        if self.rate:
            wait = rows / self.rate
            time.sleep(wait)
            self.busy_s += wait
        self.queries += rows
        return SimpleNamespace(logits=self.torch.zeros(rows, 1, self.vocab))

    def parameters(self):
        return iter([self.torch.zeros(1)])

    def eval(self):
        return self


class Stages:
    """Thread CPU time spent in each wrapped function, summed over threads."""

    def __init__(self) -> None:
        self.cpu: dict[str, float] = {}
        self._lock = threading.Lock()
        self._depth = threading.local()

    def wrap(self, owner: type, name: str, label: str) -> None:
        fn = getattr(owner, name, None)
        if fn is None:
            return
        stages = self

        def timed(*args, **kwargs):
            depth = getattr(stages._depth, label, 0)
            setattr(stages._depth, label, depth + 1)
            began = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                setattr(stages._depth, label, depth)
                if depth == 0:  # a stage calling itself counts once
                    spent = time.thread_time() - began
                    with stages._lock:
                        stages.cpu[label] = stages.cpu.get(label, 0.0) + spent

        setattr(owner, name, timed)


def children_cpu(backend: object) -> float:
    """CPU seconds of the backend's processor worker processes so far (Linux ``/proc``; 0 where
    there are none), which ``time.process_time`` does not count."""
    pool = getattr(backend, "_processor_pool", None)
    if pool is None:
        return 0.0
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in list(getattr(pool._pool, "_processes", None) or {}):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def worker(args: argparse.Namespace) -> None:
    """One family on one path, in this process; prints one JSON line."""
    import torch

    torch.set_num_threads(1)
    from benchc.data import load_dataset
    from benchc.models.hf import HFBackend
    from benchc.suite.config import SuiteConfig
    from benchc.suite.run import SuiteRun

    class Virtual(HFBackend):
        @property
        def local_cpu(self) -> bool:  # the model runs "elsewhere": the suite reads ahead
            return False

    backend = Virtual(args.checkpoint, batch_size=args.batch, image_size=448)
    backend.dtype = torch.bfloat16  # the inputs are cast as for a bf16 model on a GPU
    processor = real_processor(args.family, backend.processor)
    backend.processor = processor
    backend.tokenizer = processor.tokenizer
    backend._image_shape_matters = None
    for memo in ("_prompts", "_text_tokens", "_image_tokens"):
        if hasattr(backend, memo):
            getattr(backend, memo).clear()
    device = VirtualDevice(len(processor.tokenizer), 0.0)
    backend.model = device
    new = hasattr(backend, "prepare")
    if new and args.processor_workers:
        backend.use_processor_workers(args.processor_workers)

    stages = Stages()
    from benchc.corruptions.cache import CorruptionCache

    stages.wrap(SuiteRun, "_read", "read (planning thread)")
    # the entries' read, decode and checksum, in whichever thread (read-ahead ones included)
    stages.wrap(CorruptionCache, "read", "cache entries (any thread)")
    stages.wrap(Virtual, "length_key", "length keys")
    if new:
        stages.wrap(HFBackend, "prepare", "prepare (render, processor, cast)")
        stages.wrap(HFBackend, "forward_prepared", "model call, letter logits")
    else:
        stages.wrap(HFBackend, "forward", "forward (render, processor, cast, model, logits)")

    dataset = load_dataset(args.data)
    conditions = CONDITIONS[: args.conditions]

    def run(results: str) -> SuiteRun:
        cfg = SuiteConfig(
            model=args.checkpoint,
            dataset=args.data,
            image_size=448,
            batch_size=args.batch,
            results_dir=Path(results),
            cache_dir=Path(args.cache),
        )
        return SuiteRun(cfg, dataset, backend)

    warm = run(tempfile.mkdtemp())  # fills the corruption cache; not measured
    for key in conditions:
        warm.condition(key)
    if new:
        warm.stop_prefetch()
    device.rate, device.busy_s, device.queries = args.rate, 0.0, 0
    stages.cpu.clear()
    measured = run(tempfile.mkdtemp())
    once_ms = 0.0
    if new:
        # Once per sample per run (the prepared original, its hash): made before the clock
        # starts and reported on its own, since a run spreads it over all its conditions.
        began = time.process_time()
        for i in range(len(dataset)):
            measured._originals[i]
        once_ms = 1000 * (time.process_time() - began) / len(dataset)
    load_before = os.getloadavg()[0]
    began, cpu0, kids0 = time.perf_counter(), time.process_time(), children_cpu(backend)
    if new:  # on the clock: it starts building the first chunk
        measured.start_prefetch(conditions)  # the planned order (the cells' order)
    for key in conditions:
        measured.condition(key)
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu0
    workers_cpu = children_cpu(backend) - kids0
    cpu += workers_cpu
    if new:
        measured.stop_prefetch()
        backend.close()
    n = device.queries
    print(
        json.dumps(
            {
                "busy": device.busy_s / wall,
                "qps": n / wall,
                "queries": n,
                "wall_s": wall,
                "cpu_ms": 1000 * cpu / n,
                "stages_ms": {
                    **{k: 1000 * v / n for k, v in stages.cpu.items()},
                    **({"processor workers": 1000 * workers_cpu / n} if workers_cpu else {}),
                },
                "once_per_sample_ms": once_ms,
                "load": [load_before, os.getloadavg()[0]],
            }
        )
    )


# -- the driver ---------------------------------------------------------------------------------
def photos(n: int, side: int = 1600, seed: int = 0) -> list[bytes]:
    """``n`` JPEGs: random crops (aspect 0.5-2) of the photos bundled with scikit-image and
    scikit-learn, so image shapes (and Qwen-VL's image tokens) vary, resized to ``side`` px
    on the longer side (the 640-2048 px of real photo sets; 0 keeps the crop's size)."""
    import numpy as np
    import skimage.data
    from PIL import Image
    from sklearn.datasets import load_sample_images

    names = ["astronaut", "chelsea", "coffee", "rocket", "hubble_deep_field", "retina", "cat"]
    names.append("immunohistochemistry")
    sources = [getattr(skimage.data, name)() for name in names]
    sources += list(load_sample_images().images)
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        src = sources[i % len(sources)]
        h, w = src.shape[:2]
        aspect = float(np.exp(rng.uniform(np.log(0.5), np.log(2.0))))
        ch = min(h, int(w / aspect))
        cw = min(w, int(ch * aspect))
        y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
        crop = Image.fromarray(src[y : y + ch, x : x + cw, :3])
        if side:
            scale = side / max(crop.size)
            crop = crop.resize((round(crop.width * scale), round(crop.height * scale)))
        buf = io.BytesIO()
        crop.save(buf, "JPEG", quality=92)
        out.append(buf.getvalue())
    return out


def make_dataset(folder: Path, n: int, side: int) -> None:
    from dataclasses import replace

    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    samples = list(generate(n, 3))
    images = photos(n, side)
    save_jsonl([replace(s, image_bytes=b) for s, b in zip(samples, images, strict=True)], folder)


def extract(reference: str, out: Path) -> Path:
    """``benchc`` as of commit ``reference`` under ``out``."""
    out.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", reference, "benchc"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", default="qwen,llava,smolvlm,idefics3")
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--rate", type=float, default=45.0, help="device queries/s")
    parser.add_argument("--photo-side", type=int, default=1600, help="source photos' longer side")
    parser.add_argument("--reference", default=DEFAULT_REFERENCE, help="today's commit")
    parser.add_argument("--processor-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each path, interleaved; the median is shown"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--family", help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--conditions", type=int, default=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    from benchc.testing.dev.tiny_families import build

    families = [f.strip() for f in args.families.split(",") if f.strip()]
    unknown = sorted(set(families) - set(FAMILIES))
    if unknown:
        parser.error(f"unknown families {unknown}; known: {sorted(FAMILIES)}")
    print(f"cores {os.cpu_count()}, load {os.getloadavg()[0]:.2f}, device {args.rate} q/s")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        paths = {"today": extract(args.reference, root / "reference"), "new": ROOT}
        for family in families:
            tiny, samples, n_cond = FAMILIES[family]
            samples = min(samples or args.samples, args.samples)
            data = root / f"data-{samples}"
            if not data.exists():
                make_dataset(data, samples, args.photo_side)
            checkpoint = build(tiny, root / tiny)
            # worker processes for the tiling processors only (a light one keeps up in a thread)
            workers = args.processor_workers if family in ("smolvlm", "idefics3") else 0
            runs: dict[str, list[dict]] = {label: [] for label in paths}
            for _, (label, path) in itertools.product(range(args.repeat), paths.items()):
                env = {**os.environ, "PYTHONPATH": str(path)}
                cmd = [
                    sys.executable,
                    str(Path(__file__).resolve()),
                    "--worker=1",
                    f"--family={family}",
                    f"--checkpoint={checkpoint}",
                    f"--data={data}",
                    f"--cache={root / ('cache-' + label)}",  # each path its own entries
                    f"--batch={args.batch}",
                    f"--rate={args.rate}",
                    f"--conditions={n_cond}",
                    f"--processor-workers={workers if label == 'new' else 0}",
                ]
                done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)
                if done.returncode:
                    sys.exit(f"{family} / {label} failed:\n{done.stderr[-3000:]}")
                runs[label].append(json.loads(done.stdout.strip().splitlines()[-1]))
            report(family, {label: median_run(r) for label, r in runs.items()}, args.rate)


def median_run(runs: list[dict]) -> dict:
    """The run of median busy fraction among repeats (its own CPU and stages), with the range
    of busy and CPU over all of them (a shared machine's noise is a few percent)."""
    ordered = sorted(runs, key=lambda r: r["busy"])
    chosen = dict(ordered[len(ordered) // 2])
    chosen["repeats"] = len(runs)
    chosen["busy_range"] = [ordered[0]["busy"], ordered[-1]["busy"]]
    cpu = sorted(r["cpu_ms"] for r in runs)
    chosen["cpu_range"] = [cpu[0], cpu[-1]]
    return chosen


def report(family: str, rows: dict, rate: float) -> None:
    today, new = rows["today"], rows["new"]
    print(f"\n== {family}: {new['queries']} queries per path")
    for label, r in rows.items():
        stages = ", ".join(f"{k} {v:.1f}" for k, v in r["stages_ms"].items())
        print(
            f"  {label:<6} busy {r['busy']:.3f}  {r['qps']:5.1f} q/s  CPU {r['cpu_ms']:6.1f} "
            f"ms/query ({stages})  load {r['load'][0]:.1f}->{r['load'][1]:.1f}"
        )
        if r["repeats"] > 1:
            print(
                f"         median of {r['repeats']} runs; busy {r['busy_range'][0]:.3f}-"
                f"{r['busy_range'][1]:.3f}, CPU {r['cpu_range'][0]:.1f}-{r['cpu_range'][1]:.1f}"
            )
    if new.get("once_per_sample_ms"):
        once = new["once_per_sample_ms"]
        print(
            f"  new, once per sample per run (prepared original and its hash): {once:.1f} ms, "
            f"{once / GRID:.2f} ms per query over the {GRID}-condition grid (not in CPU above)"
        )
    print(
        f"  new/today: busy x{new['busy'] / today['busy']:.2f}, "
        f"CPU per query x{new['cpu_ms'] / today['cpu_ms']:.2f}; "
        f"cores needed at {rate:g} q/s: {new['cpu_ms'] * rate / 1000:.2f} "
        f"(today {today['cpu_ms'] * rate / 1000:.2f})"
    )


if __name__ == "__main__":
    main()
