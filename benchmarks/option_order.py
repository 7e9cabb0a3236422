"""Option order on the embedded model and its zoo: do the figures separate position bias from
benign noise, and what do the rotations cost?

Each variant (the reference checkpoint, its benign settings and re-save, a content-preserving
edit, and the position-biased ladder :data:`benchc.testing.dev.checkpoints.ORDER_EDITS`, each a
real checkpoint folder loaded with ``from_pretrained``) scores every sample of the testbed under
every rotation of its options (:func:`benchc.models.rotations.score_rotations`) on the clean
image and on one corruption per family at ``--severity``. Printed per variant: single-order
and circular accuracy (clean; corrupted, the cells' mean), position preference (clean;
corrupted), the order interaction (corrupted minus clean, paired), and the paired change of
each against the reference with its bootstrap z (1000 resamples of sample ids, the same for
both sides): what a gate on these figures would see. Last, the forward passes per sample with
and without rotations, and the time of each, measured in this run.

    python benchmarks/option_order.py                  # docs/measurements.md (~6 min, 2 cores)
    python benchmarks/option_order.py --limit 24 --corruptions fog --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchc import spec
from benchc.corruptions import CorruptionCache, iter_materialize
from benchc.metrics.position import (
    accuracy_by_position,
    circular_correct,
    position_spread,
)
from benchc.models.base import Query
from benchc.models.collate import score
from benchc.models.rotations import RotationScores, score_rotations
from benchc.suite.config import DEFAULT_DATASET, DEFAULT_MODEL, SuiteConfig, parse_corruptions
from benchc.suite.session import open_backend, open_dataset
from benchc.testing.dev.checkpoints import ORDER_EDITS, edit, weight_change, write_checkpoint

#: One corruption per family (the default run's slice).
CORRUPTIONS = "gaussian_noise,defocus_blur,fog,contrast,pixelate"
BOOT = 1000


@dataclass(frozen=True)
class Scored:
    """One variant's per-sample figures: rotation 0 right, circular right, position spread;
    each (N, C) over the conditions (clean first)."""

    single: np.ndarray
    circular: np.ndarray
    spread: np.ndarray
    by_position: np.ndarray
    seconds: float


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _images(cfg: SuiteConfig, conditions: list[str], limit: int | None):
    dataset = open_dataset(cfg)
    samples = list(dataset)[:limit]
    cache = CorruptionCache(cfg.cache_dir) if cfg.cache_dir else CorruptionCache()
    items = [(s.id, s.image()) for s in samples]
    stream = iter_materialize(items, conditions, image_size=cfg.resolved_image_size(),
                              seed=cfg.seed, cache=cache)  # fmt: skip
    images = dict(stream)
    return samples, images


def run(cfg: SuiteConfig, samples, images, conditions: list[str]) -> Scored:
    """Every sample under every rotation at every condition, through the backend's batches."""
    backend = open_backend(cfg)
    answers = np.array([s.answer for s in samples])
    single, circ, spread, by_pos = [], [], [], []
    t0 = time.perf_counter()
    for cond in conditions:
        queries = [Query(images[s.id][cond], s.question, s.options, s.hint, s.id)
                   for s in samples]  # fmt: skip
        got: RotationScores = score_rotations(backend, queries, seed=cfg.seed)
        k = got.n_options
        top = np.nanargmax(np.nan_to_num(got.probs[:, 0], nan=-1.0), axis=1)
        single.append(top == answers)
        circ.append(circular_correct(got.probs, got.offsets, answers, k))
        spread.append(position_spread(got.probs, got.offsets, k))
        by_pos.append(accuracy_by_position(got.probs, got.offsets, answers, k))
    seconds = time.perf_counter() - t0
    return Scored(np.stack(single, 1), np.stack(circ, 1), np.stack(spread, 1),
                  np.stack(by_pos), seconds)  # fmt: skip


def _figures(s: Scored) -> dict[str, np.ndarray]:
    """Per-sample values of each figure (N,): clean column 0, corrupted the cells' mean."""
    return {
        "acc clean": s.single[:, 0].astype(float),
        "circ clean": s.circular[:, 0].astype(float),
        "circ corrupted": s.circular[:, 1:].mean(1),
        "pref clean": s.spread[:, 0],
        "pref corrupted": s.spread[:, 1:].mean(1),
        "interaction": s.spread[:, 1:].mean(1) - s.spread[:, 0],
    }


def _paired_z(ref: np.ndarray, cur: np.ndarray, rows: np.ndarray) -> tuple[float, float]:
    """Paired change (cur - ref) and its bootstrap z (0 when nothing moved)."""
    d = cur - ref
    reps = d[rows].mean(axis=1)
    se = float(reps.std(ddof=1))
    change = float(d.mean())
    return change, (change / se if se > 0 else 0.0)


def _passes_per_sample(samples) -> tuple[int, int]:
    from benchc.data.rotations import rotations

    extra = [len(rotations(len(s.options), s.id)) for s in samples]
    return 1, round(float(np.mean(extra)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default=DEFAULT_DATASET)
    ap.add_argument("--model", default=DEFAULT_MODEL)
    ap.add_argument("--corruptions", default=CORRUPTIONS)
    ap.add_argument("--severity", type=int, default=3)
    ap.add_argument("--limit", type=int, default=None, help="the testbed's first N samples")
    ap.add_argument("--results-dir", type=Path, default=Path(".benchc/option-order"))
    ap.add_argument("--quick", action="store_true", help="the strongest rung of each edit")
    ap.add_argument("--seed", type=int, default=1, help="the bootstrap's seed")
    args = ap.parse_args()

    cfg = SuiteConfig(model=args.model, dataset=args.dataset, results_dir=args.results_dir)
    conditions = [spec.CLEAN] + [spec.condition_key(c, args.severity)
                                 for c in parse_corruptions(args.corruptions)]  # fmt: skip
    samples, images = _images(cfg, conditions, args.limit)
    source = Path(args.model)
    variants: list[tuple[str, str, SuiteConfig]] = [
        ("reference (itself)", "benign", cfg),
        ("bfloat16 inference", "benign", replace(cfg, dtype="bfloat16")),
        ("batch size 1", "benign", replace(cfg, batch_size=1)),
    ]
    ladder = [(edit("re-saved in bfloat16"), 1, "benign"),
              (edit("text-only fine-tune (steps)"), 10, "content edit")]  # fmt: skip
    for e in ORDER_EDITS:
        rungs = e.strengths[-1:] if args.quick else e.strengths
        ladder += [(e, s, "position edit") for s in rungs]
    for e, s, kind in ladder:
        folder = args.results_dir / "checkpoints" / f"{_slug(e.name)}-{s:g}"
        write_checkpoint(source, folder, e, s)
        label = f"{e.name} {s:g}" if len(e.strengths) > 1 else e.name
        variants.append((f"{label} (weights {weight_change(source, folder):.2g})", kind,
                         replace(cfg, model=str(folder))))  # fmt: skip

    print(
        f"# option order: {len(samples)} samples, clean + {', '.join(conditions[1:])}; every "
        f"rotation of each sample's options (K = {sorted({len(s.options) for s in samples})})"
    )
    scored = [(name, kind, run(c, samples, images, conditions)) for name, kind, c in variants]
    rng = np.random.default_rng(args.seed)
    rows = rng.integers(0, len(samples), (BOOT, len(samples)))
    ref = _figures(scored[0][2])
    names = list(ref)
    print()
    print("| variant | kind | " + " | ".join(names) + " | acc by answer position, clean |")
    print("|---|---|" + "---|" * len(names) + "---|")
    for name, kind, s in scored:
        fig = _figures(s)
        cells = []
        for f in names:
            change, z = _paired_z(ref[f], fig[f], rows)
            moved = "" if s is scored[0][2] else f" ({change:+.3f}, z {z:+.1f})"
            cells.append(f"{fig[f].mean():.3f}{moved}")
        by_pos = " ".join("-" if np.isnan(a) else f"{a:.2f}" for a in s.by_position[0])
        print(f"| {name} | {kind} | " + " | ".join(cells) + f" | {by_pos} |", flush=True)
    one, rotated = _passes_per_sample(samples)
    base = scored[0][2].seconds
    print()
    print(f"# forward passes per sample and condition: {one} in one order, {rotated} with every "
          f"rotation ({rotated}x); the reference's rotated scoring took {base:.1f} s for "
          f"{len(samples)} x {len(conditions)} x {rotated} queries")  # fmt: skip
    backend = open_backend(cfg)
    t0 = time.perf_counter()
    for cond in conditions:
        score(backend, [Query(images[s.id][cond], s.question, s.options, s.hint, s.id)
                        for s in samples])  # fmt: skip
    single = time.perf_counter() - t0
    print(f"# the same conditions in one order: {single:.1f} s (rotations {base / single:.2f}x)")


if __name__ == "__main__":
    main()
