"""Model-backend throughput: the tiny VLM on CPU, and config-only (random-weight) VLMs on GPU.

``cpu``: samples/s of the embedded tiny VLM through the full HFBackend path (chat template,
processor, one forward per batch, letter logits) via ``benchc.models.collate.score`` at batch
1, 16 and 64; the reference is batch 1 measured in the same run.

``config``: a transformers VLM built from its config class with random weights (no download),
e.g. a Qwen2.5-VL-7B-shaped model, fed inputs built without its processor (Qwen-VL's processor
needs torchvision). Reports samples/s per batch size (reference: the smallest batch), the
estimated forward FLOPs and the fraction of the device's bf16 dense peak. ``--shrink`` keeps the
architecture but makes it tiny, to check the path on CPU.

    python benchmarks/bench_models.py cpu [--model fixtures/tiny-vlm] [--n 128]
    python benchmarks/bench_models.py config --config qwen2.5-vl-7b --batches 1 8 32
    python benchmarks/bench_models.py config --config path/to/config.json --device cuda

``pipeline``: the Qwen2.5-VL-7B-shaped random-weight model behind ``HFBackend`` with the real
Qwen2.5-VL image-processor settings (448-px photos, tiny BPE vocabulary: ``bench_pipeline.py``)
through ``SuiteRun.condition`` -- the corruption cache, the input pipeline, letter logits, the
results store -- in sequence and pipelined. Prints the device-busy fraction (CUDA-event time
inside the model's forward / wall time), queries/s and the share of the bf16 peak. For a lent
GPU: ``benchmarks/device_check.sh`` (one command, under 10 minutes).

    python benchmarks/bench_models.py pipeline [--samples 512] [--conditions 2] [--shrink]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]

#: bf16 dense peak TFLOP/s by device-name substring (vendor datasheets, SXM parts).
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 125.0}


# --------------------------------------------------------------------------------------- cpu
def bench_cpu(args: argparse.Namespace) -> None:
    from benchc.data.synthetic import make_item
    from benchc.models.base import Query
    from benchc.models.collate import score
    from benchc.models.hf import HFBackend

    torch.set_num_threads(args.threads)
    model = args.model or _default_tiny_model()
    backend = HFBackend(str(model), device="cpu")
    items = [make_item(i, seed=123) for i in range(args.n)]
    queries = [Query(it.image, it.question, it.options, id=str(i)) for i, it in enumerate(items)]
    score(backend, queries[:8], batch_size=8)  # warm-up
    print(f"model {backend.fingerprint}, {args.n} synthetic queries, {args.threads} thread(s)")
    rates = {}
    for bs in args.batches:
        best = float("inf")
        for _ in range(args.repeat):
            start = time.perf_counter()
            score(backend, queries, batch_size=bs)
            best = min(best, time.perf_counter() - start)
        rates[bs] = args.n / best
    ref = rates[args.batches[0]]
    for bs, rate in rates.items():
        print(f"batch {bs:>3}: {rate:8.1f} samples/s  ({rate / ref:5.2f}x batch {args.batches[0]})")


def _default_tiny_model() -> Path:
    committed = ROOT / "fixtures" / "tiny-vlm"
    if (committed / "config.json").is_file():
        return committed
    import tempfile

    from benchc.tinyvlm.build import build_untrained

    print("fixtures/tiny-vlm not found: timing an untrained build of the same shape")
    return build_untrained(Path(tempfile.mkdtemp()) / "tiny", seed=0)


# ------------------------------------------------------------------------------------ config
def qwen25_vl_7b_config():
    """The Qwen2.5-VL-7B-Instruct shape (from its published config.json), random weights."""
    from transformers import Qwen2_5_VLConfig

    return Qwen2_5_VLConfig(
        text_config={
            "vocab_size": 152064,
            "hidden_size": 3584,
            "intermediate_size": 18944,
            "num_hidden_layers": 28,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "max_position_embeddings": 128000,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1000000.0,
                "mrope_section": [16, 24, 24],
            },
            "tie_word_embeddings": False,
        },
        vision_config={
            "depth": 32,
            "hidden_size": 1280,
            "intermediate_size": 3420,
            "num_heads": 16,
            "out_hidden_size": 3584,
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
            "fullatt_block_indexes": [7, 15, 23, 31],
        },
        tie_word_embeddings=False,
    )


BUILTIN_CONFIGS = {"qwen2.5-vl-7b": qwen25_vl_7b_config}


def load_config(name_or_path: str):
    if name_or_path in BUILTIN_CONFIGS:
        return BUILTIN_CONFIGS[name_or_path]()
    from transformers import AutoConfig

    path = Path(name_or_path)
    if not path.exists():
        raise ValueError(
            f"--config {name_or_path!r}: not a built-in ({', '.join(BUILTIN_CONFIGS)}) "
            "nor a config.json / checkpoint folder"
        )
    return AutoConfig.from_pretrained(path.parent if path.is_file() else path)


def shrink(cfg) -> None:
    """Same architecture, tiny widths and depths: exercises the path on a CPU."""
    t = cfg.text_config
    # two heads of the original head_dim 128, so Qwen's mrope sections still fit
    t.hidden_size, t.intermediate_size, t.num_hidden_layers = 256, 512, 2
    t.num_attention_heads, t.num_key_value_heads = 2, 1
    if hasattr(t, "layer_types"):
        t.layer_types = t.layer_types[:2]
    if hasattr(t, "max_window_layers"):
        t.max_window_layers = 2
    v = cfg.vision_config
    if cfg.model_type.startswith("qwen2"):
        v.depth, v.hidden_size, v.intermediate_size, v.num_heads = 2, 64, 128, 2
        v.out_hidden_size, v.fullatt_block_indexes = 256, [1]
    else:
        v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.num_attention_heads = (
            64,
            128,
            2,
            2,
        )


def make_inputs(cfg, batch: int, image_px: int, text_len: int, device: str, dtype) -> dict:
    """Model inputs for ``batch`` one-image prompts, built from the config alone."""
    gen = torch.Generator().manual_seed(0)
    vocab = cfg.text_config.vocab_size
    text = torch.randint(
        min(100, vocab // 4), min(20000, vocab // 2), (batch, text_len), generator=gen
    )
    if cfg.model_type in ("qwen2_5_vl", "qwen2_vl"):
        v = cfg.vision_config
        grid = image_px // v.patch_size
        grid -= grid % v.spatial_merge_size
        n_patches = grid * grid
        n_image_tokens = n_patches // v.spatial_merge_size**2
        image = torch.full((batch, n_image_tokens), cfg.image_token_id)
        start = torch.full((batch, 1), cfg.vision_start_token_id)
        end = torch.full((batch, 1), cfg.vision_end_token_id)
        half = text_len // 2
        ids = torch.cat([text[:, :half], start, image, end, text[:, half:]], dim=1)
        patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size**2
        extra = {
            "pixel_values": torch.randn(batch * n_patches, patch_dim, generator=gen),
            "image_grid_thw": torch.tensor([[1, grid, grid]] * batch),
        }
        vision_tokens = batch * n_patches
    elif hasattr(cfg, "image_token_index") or hasattr(cfg, "image_token_id"):
        token = getattr(cfg, "image_token_index", None) or cfg.image_token_id
        v = cfg.vision_config
        n_image_tokens = getattr(cfg, "image_seq_length", None) or (
            (v.image_size // v.patch_size) ** 2
        )
        image = torch.full((batch, n_image_tokens), token)
        ids = torch.cat([image, text], dim=1)
        extra = {"pixel_values": torch.randn(batch, 3, v.image_size, v.image_size, generator=gen)}
        vision_tokens = batch * n_image_tokens
    else:
        raise ValueError(f"no input builder for model_type {cfg.model_type!r}")
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), **extra}
    out = {
        k: (v.to(device, dtype) if torch.is_floating_point(v) else v.to(device))
        for k, v in inputs.items()
    }
    out["_vision_tokens"] = vision_tokens
    out["_image_tokens"] = n_image_tokens
    return out


def forward_flops(model, cfg, inputs: dict) -> float:
    """Matmul FLOPs of one forward: 2 x params x tokens per tower, plus attention scores."""
    tower = next(
        getattr(model.model, a) for a in ("visual", "vision_tower") if hasattr(model.model, a)
    )
    lm = model.model.language_model
    p_vision = sum(p.numel() for p in tower.parameters())
    p_lm = sum(p.numel() for p in lm.parameters()) - lm.embed_tokens.weight.numel()
    b, t = inputs["input_ids"].shape
    t_cfg = cfg.text_config
    flops = 2 * p_lm * b * t + 2 * p_vision * inputs["_vision_tokens"]
    flops += 4 * t_cfg.num_hidden_layers * b * t * t * t_cfg.hidden_size  # QK^T and AV
    flops += 2 * t_cfg.hidden_size * t_cfg.vocab_size * b  # lm_head at the last position only
    return float(flops)


def bench_config(args: argparse.Namespace) -> None:
    from transformers import AutoModelForImageTextToText

    cfg = load_config(args.config)
    if args.shrink:
        shrink(cfg)
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(
            cfg, dtype=dtype, attn_implementation=args.attn
        ).eval()
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"{args.config}{' (shrunk)' if args.shrink else ''}: {type(model).__name__}, "
        f"{n_params / 1e9:.3f} B params, {dtype}, {device}, attention {args.attn}, built in "
        f"{time.perf_counter() - start:.1f} s"
    )
    peak = args.peak_tflops
    if peak is None and device.startswith("cuda"):
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
        print(f"device {name}, bf16 dense peak {peak or 'unknown'} TFLOP/s")
    rates = {}
    for bs in args.batches:
        inputs = make_inputs(cfg, bs, args.image_px, args.text_len, device, dtype)
        vision_tokens = inputs.pop("_vision_tokens")
        image_tokens = inputs.pop("_image_tokens")
        try:
            with torch.inference_mode():
                model(**inputs, logits_to_keep=1, use_cache=False)  # warm-up
                _sync(device)
                best = float("inf")
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    out = model(**inputs, logits_to_keep=1, use_cache=False)
                    torch.log_softmax(out.logits[:, -1].float(), -1)
                    _sync(device)
                    best = min(best, time.perf_counter() - t0)
        except torch.OutOfMemoryError:
            print(f"batch {bs:>3}: out of memory")
            break
        inputs["_vision_tokens"] = vision_tokens
        tflops = forward_flops(model, cfg, inputs) / best / 1e12
        rates[bs] = (bs / best, tflops)
        del inputs, out
    if not rates:
        return
    ref_bs = next(iter(rates))
    print(f"prompt: {args.text_len} text tokens + {image_tokens} image tokens (one image)")
    for bs, (rate, tflops) in rates.items():
        frac = f", {100 * tflops / peak:5.1f}% of bf16 peak" if peak else ""
        print(
            f"batch {bs:>3}: {rate:8.2f} samples/s ({rate / rates[ref_bs][0]:5.2f}x batch "
            f"{ref_bs}), {tflops:7.2f} TFLOP/s{frac}"
        )
    best_bs, (best_rate, _) = max(rates.items(), key=lambda kv: kv[1][0])
    # the grid: every sample under every condition, plus VSI's clean and blurred passes
    passes = args.grid_samples * (args.grid_conditions + 2)
    print(
        f"whole grid ({args.grid_samples} samples x {args.grid_conditions} conditions + 2 VSI "
        f"passes = {passes} forwards) at batch {best_bs}: {passes / best_rate / 3600:.2f} h "
        "of model time on this device (corruptions overlap on the CPU workers)"
    )


# ---------------------------------------------------------------------------------- pipeline
class ForwardMeter:
    """Time inside the model's forward (CUDA events on a GPU, wall time on a CPU) and its
    matmul FLOPs, from forward hooks."""

    def __init__(self, model, cfg, device: str) -> None:
        self.cfg, self.cuda = cfg, device.startswith("cuda")
        self.events: list = []
        self.cpu_s = 0.0
        self.flops = 0.0
        self.queries = 0
        self._t0 = 0.0
        model.register_forward_pre_hook(self._before, with_kwargs=True)
        model.register_forward_hook(self._after, with_kwargs=True)
        self.model = model

    def _before(self, module, args, kwargs) -> None:
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            start.record()
            self.events.append([start, None])
        else:
            self._t0 = time.perf_counter()
        ids = kwargs["input_ids"]
        b = ids.shape[0]
        vision = kwargs["pixel_values"].shape[0] if "pixel_values" in kwargs else 0
        self.flops += forward_flops(
            self.model, self.cfg, {"input_ids": ids, "_vision_tokens": vision}
        )
        self.queries += b

    def _after(self, module, args, kwargs, output) -> None:
        if self.cuda:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.events[-1][1] = end
        else:
            self.cpu_s += time.perf_counter() - self._t0

    def busy_s(self) -> float:
        if not self.cuda:
            return self.cpu_s
        torch.cuda.synchronize()
        return sum(a.elapsed_time(b) for a, b in self.events) / 1000

    def reset(self) -> None:
        self.events, self.cpu_s, self.flops, self.queries = [], 0.0, 0.0, 0


def bench_pipeline(args: argparse.Namespace) -> None:
    import sys
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_pipeline import make_dataset, real_processor
    from transformers import AutoModelForImageTextToText

    from benchc.data import load_dataset
    from benchc.models.hf import HFBackend
    from benchc.suite.config import SuiteConfig
    from benchc.suite.run import SuiteRun
    from benchc.testing.dev.tiny_families import build

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    root = Path(tempfile.mkdtemp(prefix="benchc-device-"))
    began = time.perf_counter()
    make_dataset(root / "data", args.samples, 1600)
    checkpoint = build("qwen2_5_vl", root / "tiny-qwen")

    class Remote(HFBackend):
        """On a CPU the forward still runs here; pretend otherwise so the suite pipelines."""

        @property
        def local_cpu(self) -> bool:
            return False

    backend = Remote(str(checkpoint), device=device, batch_size=args.batch, image_size=448)
    processor = real_processor("qwen", backend.processor)
    backend.processor, backend.tokenizer = processor, processor.tokenizer
    backend._image_shape_matters = None
    for memo in (backend._prompts, backend._text_tokens, backend._image_tokens):
        memo.clear()
    cfg = load_config("qwen2.5-vl-7b")
    if args.shrink:
        shrink(cfg)
    tok = processor.tokenizer
    ids = tok.convert_tokens_to_ids
    cfg.image_token_id, cfg.video_token_id = ids("<|image_pad|>"), ids("<|video_pad|>")
    cfg.vision_start_token_id, cfg.vision_end_token_id = (
        ids("<|vision_start|>"),
        ids("<|vision_end|>"),
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForImageTextToText.from_config(
            cfg, dtype=dtype, attn_implementation=args.attn
        ).eval()
    backend.model, backend.dtype = model, dtype
    backend._input_device = next(model.parameters()).device
    meter = ForwardMeter(model, cfg, device)
    peak = args.peak_tflops
    if peak is None and device.startswith("cuda"):
        name = torch.cuda.get_device_name()
        peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    print(
        f"qwen2.5-vl-7b{' (shrunk)' if args.shrink else ''} on {device} ({dtype}, {args.attn}), "
        f"{args.samples} photos x {args.conditions} conditions, batch {args.batch}, set up in "
        f"{time.perf_counter() - began:.0f} s; bf16 peak {peak or 'unknown'} TFLOP/s"
    )
    conditions = ["brightness-2", "contrast-3", "jpeg_compression-4"][: args.conditions]
    dataset = load_dataset(str(root / "data"))

    def suite_run(label: str, pipelined: bool) -> SuiteRun:
        sc = SuiteConfig(
            model=str(checkpoint),
            dataset=str(root / "data"),
            image_size=448,
            batch_size=args.batch,
            results_dir=root / f"results-{label}",
            cache_dir=root / "cache",
        )
        run = SuiteRun(sc, dataset, backend)
        if not pipelined:
            run.lookahead.schedule = lambda *a, **k: None  # every batch built in turn
        return run

    warm = suite_run("warm", True)
    warm.start_prefetch(conditions)
    for key in conditions:  # the corruption cache and the kernels, warm
        warm.condition(key)
    warm.stop_prefetch()
    for label, pipelined in (("in sequence", False), ("pipelined", True)):
        run = suite_run(label.replace(" ", "-"), pipelined)
        run.start_prefetch(conditions)
        meter.reset()
        t0 = time.perf_counter()
        for key in conditions:
            run.condition(key)
        wall = time.perf_counter() - t0
        run.stop_prefetch()
        busy = meter.busy_s()
        share = (
            f", {100 * meter.flops / busy / 1e12 / peak:5.1f}% of bf16 peak in forward"
            if peak
            else ""
        )
        print(
            f"{label:<12} busy {busy / wall:.3f} of {wall:.1f} s, {meter.queries / wall:7.1f} "
            f"queries/s, {meter.flops / wall / 1e12:7.2f} TFLOP/s over the wall{share}"
        )


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="mode", required=True)
    cpu = sub.add_parser("cpu", help="tiny VLM through HFBackend on CPU")
    cpu.add_argument("--model", type=Path, default=None)
    cpu.add_argument("--n", type=int, default=128)
    cpu.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64])
    cpu.add_argument("--threads", type=int, default=1)
    cpu.add_argument("--repeat", type=int, default=3)
    conf = sub.add_parser("config", help="random-weight model from a config, inputs w/o processor")
    conf.add_argument("--config", default="qwen2.5-vl-7b")
    conf.add_argument("--device", default=None)
    conf.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32])
    conf.add_argument("--image-px", type=int, default=448)
    conf.add_argument("--text-len", type=int, default=64)
    conf.add_argument("--repeat", type=int, default=3)
    conf.add_argument("--peak-tflops", type=float, default=None)
    conf.add_argument("--shrink", action="store_true", help="tiny widths: smoke-test on CPU")
    conf.add_argument(
        "--attn", default="sdpa", help="attention kernel: sdpa, eager, flash_attention_2"
    )
    conf.add_argument("--grid-samples", type=int, default=849)
    conf.add_argument("--grid-conditions", type=int, default=96, help="clean + 19 x 5 cells")
    pipe = sub.add_parser("pipeline", help="7B-shaped model through SuiteRun (device check)")
    pipe.add_argument("--device", default=None)
    pipe.add_argument("--samples", type=int, default=512)
    pipe.add_argument("--conditions", type=int, default=2, choices=(1, 2, 3))
    pipe.add_argument("--batch", type=int, default=16)
    pipe.add_argument("--attn", default="sdpa", help="sdpa, eager, flash_attention_2")
    pipe.add_argument("--peak-tflops", type=float, default=None)
    pipe.add_argument("--shrink", action="store_true", help="tiny widths: check the path on CPU")
    args = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    {"cpu": bench_cpu, "config": bench_config, "pipeline": bench_pipeline}[args.mode](args)


if __name__ == "__main__":
    main()
