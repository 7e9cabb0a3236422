"""Measure a built tiny VLM on held-out synthetic samples and write ``BUILD_REPORT.md``.

The numbers are the acceptance figures of the embedded model (issue 4): clean accuracy per kind,
accuracy with images shuffled across samples (must sit near chance: the model uses its image),
accuracy under blur and noise at severities 1..5 (must fall), checkpoint size and build time.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from benchc.data import synthetic
from benchc.spec import SEVERITIES
from benchc.tinyvlm.train import EVAL_SEED, evaluate

CURVES = (
    "gaussian_blur",
    "defocus_blur",
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "speckle_noise",
    "pixelate",
)


def checkpoint_bytes(model_dir: str | Path) -> int:
    """Total size of the files in the checkpoint folder."""
    return sum(p.stat().st_size for p in Path(model_dir).iterdir() if p.is_file())


def measure(model_dir: str | Path, *, n: int = 600, seed: int = EVAL_SEED) -> dict:
    """Held-out figures of the checkpoint in ``model_dir``, loaded as the backend loads it."""
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(model_dir, backend="pil")
    model = AutoModelForImageTextToText.from_pretrained(model_dir)
    conditions = [(c, s) for c in CURVES for s in SEVERITIES]
    t0 = time.time()
    res = evaluate(model, processor, n=n, seed=seed, size=128, corruptions=conditions)
    res["eval_seconds"] = round(time.time() - t0, 1)
    res["params"] = sum(p.numel() for p in model.parameters())
    res["bytes"] = checkpoint_bytes(model_dir)
    return res


def render(res: dict, build: dict, notes: str = "") -> str:
    """Markdown report from :func:`measure`'s figures and the build's timing."""
    clean = res["clean"]
    chance = 0.25
    lines = [
        "# Embedded tiny VLM: build report",
        "",
        "Produced by `python -m benchc.tinyvlm.build --out fixtures/tiny-vlm` and measured by",
        "`python -m benchc.tinyvlm.report --model fixtures/tiny-vlm`.",
        "",
        f"- Architecture: LLaVA (CLIP vision tower + Llama LM), {res['params']:,} parameters,"
        " fp32.",
        f"- Checkpoint size: {res['bytes'] / 1e6:.2f} MB (limit 20 MB).",
    ]
    for key, val in build.items():
        lines.append(f"- {key}: {val}")
    lines += [
        "",
        f"## Held-out accuracy ({res['n']} samples, seed {res['seed']}, {res['size']} px,"
        " 4 options)",
        "",
        "| kind | clean accuracy |",
        "|---|---|",
    ]
    lines += [f"| {k} | {clean[k]:.3f} |" for k in ("all", *synthetic.KINDS) if k in clean]
    lines += [
        "",
        f"Images shuffled across samples: {res['shuffled_images']:.3f} "
        f"(chance {chance:.2f}; gap {abs(res['shuffled_images'] - chance) * 100:.1f} points).",
        "",
        "## Accuracy under corruption (benchc.corruptions, seed 0)",
        "",
        "| corruption | " + " | ".join(f"sev {s}" for s in SEVERITIES) + " |",
        "|---|" + "---|" * len(SEVERITIES),
    ]
    for c in CURVES:
        cells = [f"{res[f'{c}-{s}']:.3f}" for s in SEVERITIES if f"{c}-{s}" in res]
        if cells:
            lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += ["", f"Evaluation took {res['eval_seconds']} s.", ""]
    if notes:
        lines += ["## Notes", "", notes.strip(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchc.tinyvlm.report", description=__doc__)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=None, help="default: <model>/BUILD_REPORT.md")
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--build-info", type=Path, default=None, help="JSON of build facts to list")
    ap.add_argument("--notes", type=Path, default=None, help="markdown appended as 'Notes'")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    res = measure(args.model, n=args.n)
    build = json.loads(args.build_info.read_text()) if args.build_info else {}
    out = args.out or args.model / "BUILD_REPORT.md"
    notes = args.notes.read_text() if args.notes else ""
    out.write_text(render(res, build, notes))
    (out.with_suffix(".json")).write_text(json.dumps(res, indent=1, sort_keys=True) + "\n")
    print(out.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
