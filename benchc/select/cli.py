"""``python -m benchc.select``: select a corruption-responsive, diverse subset of a pool.

Example (the embedded testbed)::

    python -m benchc.select --synthetic 400 --synthetic-seed 1 \
        --selector fixtures/tiny-vlm --selector fixtures/tiny-vlm-b --out fixtures/testbed

The pool is ``--pool PATH`` (any format ``load_dataset`` accepts; repeat it for several source
benchmarks, balanced by :mod:`benchc.select.pool` to ``--pool-size`` over sources and the task
families of ``--family-key``) or ``--synthetic N`` (the seeded generator). The Bench-C recipe
(six VLMEvalKit TSVs -> 4,000 -> 1,750 -> 849) is in docs/guides/testbed.md. Each
``--selector`` is a ``--model`` string for ``benchc.models.registry.load_backend``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchc.data.fingerprint import fingerprint, sample_digest
from benchc.data.native import DEFAULT_JSONL
from benchc.data.sample import Dataset
from benchc.data.synthetic import KINDS
from benchc.select.embed import TEXT_METHODS, sample_text, text_embeddings
from benchc.spec import CORRUPTIONS, DEFAULT_SEED


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchc.select", description=__doc__.split("\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--pool",
        action="append",
        help="candidate dataset path (JSONL, TSV or HF folder); repeat for several sources",
    )
    src.add_argument("--synthetic", type=int, metavar="N", help="generate N candidates")
    p.add_argument("--synthetic-seed", type=int, default=0)
    p.add_argument("--synthetic-size", type=int, default=128, help="synthetic image side (px)")
    p.add_argument(
        "--synthetic-kinds",
        default=",".join(KINDS),
        help="comma-separated kinds the generator cycles through; repeating a kind weights it",
    )
    p.add_argument(
        "--pool-size",
        type=int,
        default=None,
        help="balance the --pool sources and their task families to this many samples",
    )
    p.add_argument("--family-key", default="category", help="sample field naming the task family")
    p.add_argument("--pool-seed", type=int, default=0, help="seed of the balanced draw")
    p.add_argument("--lenient", action="store_true", help="skip invalid pool samples")
    p.add_argument("--selector", action="append", default=[], help="model string (repeat)")
    p.add_argument(
        "--reuse-predictions",
        metavar="NPZ",
        action="append",
        default=[],
        help="take selector answers from previous runs' selection_predictions.npz instead of "
        "running the selectors (repeat to combine selectors run separately; pool ids must be "
        "among each file's samples; image embeddings come from the first file)",
    )
    p.add_argument("--out", required=True, help="folder for the selected set + report")
    p.add_argument("--image-size", type=int, default=None, help="longer side before corruption")
    p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="corruption seed")
    p.add_argument("--corruptions", default=",".join(CORRUPTIONS), help="comma-separated subset")
    p.add_argument("--text-embed", choices=TEXT_METHODS, default="auto")
    p.add_argument("--workers", type=int, default=1, help="corruption worker processes")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--no-cache", action="store_true", help="do not use the corruption cache")
    p.add_argument(
        "--overwrite", action="store_true", help="replace an existing selection in --out"
    )
    return p


def _pool(args: argparse.Namespace) -> tuple[Dataset, dict | None]:
    """The candidate pool and, for ``--pool`` sources, its composition (what was drawn)."""
    if args.pool:
        from benchc.data.loaders import load_dataset
        from benchc.select.pool import balance

        sources = [load_dataset(p, lenient=args.lenient) for p in args.pool]
        if len(sources) == 1 and args.pool_size is None:
            return sources[0], None
        try:
            return balance(sources, args.pool_size, family_key=args.family_key, seed=args.pool_seed)
        except ValueError as exc:
            raise SystemExit(f"--pool: {exc}") from None
    from benchc.data.synthetic import generate

    kinds = tuple(k.strip() for k in args.synthetic_kinds.split(",") if k.strip())
    samples = generate(args.synthetic, args.synthetic_seed, size=args.synthetic_size, kinds=kinds)
    name = f"synthetic-{args.synthetic}-s{args.synthetic_seed}"
    return Dataset(name=name, samples=tuple(samples), fingerprint=fingerprint(samples)), None


def _prepare_out(out: Path, *, overwrite: bool) -> None:
    """Refuse to mix a new selection with old files; ``--overwrite`` removes an old selection:
    only the files a selection writes (known by its ``selection_report.json``), never the rest
    of the folder."""
    from benchc.select.report import REPORT_JSON

    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / DEFAULT_JSONL).is_file() or not (out / REPORT_JSON).is_file():
        raise SystemExit(
            f"--out {out} exists and does not hold a selection benchc wrote (no {DEFAULT_JSONL} "
            f"with its {REPORT_JSON}); choose another folder"
        )
    if not overwrite:
        raise SystemExit(f"--out {out} already holds a selection; pass --overwrite to replace it")
    for path in selection_files(out):
        path.unlink(missing_ok=True)
    for sub in ("images", "masks"):
        if (out / sub).is_dir() and not any((out / sub).iterdir()):
            (out / sub).rmdir()


def selection_files(out: Path) -> list[Path]:
    """The files a selection wrote into ``out``: its samples, the image and mask files they
    name inside ``out``, and its report, scores and predictions."""
    from benchc.select.predict import PREDICTIONS_NPZ
    from benchc.select.report import REPORT_JSON, REPORT_MD, SCORES_JSONL

    files = [out / n for n in (DEFAULT_JSONL, REPORT_JSON, REPORT_MD, SCORES_JSONL,
                               PREDICTIONS_NPZ)]  # fmt: skip
    root = out.resolve()
    for line in (out / DEFAULT_JSONL).read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        region = (rec.get("meta") or {}).get("region") if isinstance(rec, dict) else None
        for rel in (rec.get("image") if isinstance(rec, dict) else None,
                    region.get("mask") if isinstance(region, dict) else None):  # fmt: skip
            if isinstance(rel, str) and (out / rel).resolve().is_relative_to(root):
                files.append(out / rel)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if bool(args.selector) == bool(args.reuse_predictions):
        parser.error("give --selector (one or more) or --reuse-predictions, not both")
    if args.pool_size is not None and not args.pool:
        parser.error("--pool-size balances --pool sources; it has no meaning with --synthetic")
    import torch

    torch.set_num_threads(1)
    from benchc.corruptions import CorruptionCache
    from benchc.models.registry import load_backend
    from benchc.select.core import run_selection
    from benchc.select.predict import (
        PREDICTIONS_NPZ,
        collect_predictions,
        combine_predictions,
        save_predictions,
    )
    from benchc.select.report import REPORT_MD, write_selection

    corruptions = tuple(c.strip() for c in args.corruptions.split(",") if c.strip())
    _prepare_out(Path(args.out), overwrite=args.overwrite)
    t0 = time.perf_counter()
    pool, composition = _pool(args)
    digests = [sample_digest(s) for s in pool]
    if args.reuse_predictions:
        preds, names, fingerprints, sources = combine_predictions(
            args.reuse_predictions, pool.ids, digests, seed=args.seed, image_size=args.image_size
        )
        specs = [f"reused from {src}" for src in sources]
    else:
        selectors = [
            load_backend(s, batch_size=args.batch_size, image_size=args.image_size)
            for s in args.selector
        ]
        preds = collect_predictions(
            selectors,
            pool,
            image_size=args.image_size,
            seed=args.seed,
            corruptions=corruptions,
            cache=None if args.no_cache else CorruptionCache(),
            workers=args.workers,
            progress=sys.stderr.isatty(),
        )
        names = [b.name for b in selectors]
        fingerprints = [b.fingerprint for b in selectors]
        specs = list(args.selector)
    texts = [sample_text(s.question, s.options) for s in pool]
    text_emb, text_method = text_embeddings(texts, args.text_embed)
    run = run_selection(
        preds.top1,
        pool.n_options,
        preds.image_emb,
        text_emb,
        ids=pool.ids,
        categories=[s.category for s in pool],
        answers=pool.answers,
        clean_top1=preds.clean_top1,
        selector_names=names,
    )
    info = {
        "pool": ", ".join(args.pool or [])
        or f"synthetic(n={args.synthetic}, seed={args.synthetic_seed}, size={args.synthetic_size}, "
        f"kinds={args.synthetic_kinds})",
        "selectors": [
            f"{n}: {s} ({f})" for n, s, f in zip(names, specs, fingerprints, strict=True)
        ],
        "corruptions": len(preds.corruptions),
        "seed": args.seed,
        "image_size": args.image_size,
        "text_embedding": text_method,
        "image_embedding": preds.image_source,
    }
    if composition is not None:
        info["pool_composition"] = composition
    report = write_selection(run, pool, args.out, run_info=info)
    save_predictions(
        Path(args.out) / PREDICTIONS_NPZ,
        preds,
        ids=pool.ids,
        digests=digests,
        selector_names=names,
        selector_fingerprints=fingerprints,
        seed=args.seed,
        image_size=args.image_size,
    )
    summary = {k: report[k] for k in ("n_pool", "n_eligible", "n_selected")}
    summary["clean_accuracy_selected"] = {
        s["name"]: round(s["clean_accuracy_selected"], 3) for s in report["selectors"]
    }
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(summary))
    print(f"wrote {args.out}/ (samples.jsonl, images/, {REPORT_MD})")
    return 0
