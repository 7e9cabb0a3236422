"""The checkpoint zoo: real weight edits of the embedded model, gated like a release.

Each edit of :data:`benchc.testing.dev.checkpoints.EDITS` (projector scaled down, vision tower
perturbed, vision layers re-initialised, a brief text-only fine-tune, the vision tower
quantised to int8 / int4 / int3, a random low-rank update merged, a brief fine-tune on
fixed-order data (position-biased), and the benign re-save in bfloat16), on its ladder of
strengths, is written as a checkpoint folder and run through the
suite's real model path (``from_pretrained`` on the folder, the results store) on a grid of
``--corruptions`` x ``--severities``; benign settings of the reference folder (bfloat16
inference, batch size 1, the eager attention implementation) run beside them. Every variant is
then gated against the reference model's outputs (cells, families, the model level: what the
suite runs on that grid, with its false-alarm budget) on ``--resamples`` bootstrap resamples of
the testbed (sample ids drawn with replacement, the same for both sides).

Printed per variant: clean and corrupted accuracy change, the negative flip rates, and in how
many resamples the verdict was FAIL, UNRESOLVED or PASS, with the gates that caught it. The
last lines check the targets of docs/spec.md §6: every edit moving clean or corrupted accuracy,
or circular accuracy (option order, §4), by 3 points or more is FAIL or UNRESOLVED in at least
19 of 20 resamples; every benign variant is PASS in at least 19 of 20. Then the option-order
floors' calibration: each benign variant's largest change, the floor it implies, and the
held-out variant's change against the floor.

    python benchmarks/checkpoint_zoo.py                    # docs/measurements.md (~10 min, 2 cores)
    python benchmarks/checkpoint_zoo.py --quick --resamples 3 --corruptions fog --severities 3
"""

from __future__ import annotations

import argparse
import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gate_power import Outputs, budget_for, cases, gate_statuses, resample, run_variant

from benchc.gates import ErrorBudget
from benchc.suite.config import (
    DEFAULT_DATASET,
    DEFAULT_MODEL,
    SuiteConfig,
    parse_corruptions,
    parse_severities,
)
from benchc.testing.dev.checkpoints import EDITS, weight_change, write_checkpoint

#: The default grid: the default run's slice (one corruption per family, severities 1, 3, 5).
CORRUPTIONS = "gaussian_noise,defocus_blur,fog,contrast,pixelate"
SEVERITIES = "1,3,5"
#: An edit "moves accuracy" when clean or corrupted accuracy changes by at least this much.
MEANINGFUL = 0.03
#: Resample share a verdict must reach (19 of 20).
SHARE = 0.95


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _flips(ref: Outputs, out: Outputs) -> tuple[float, float]:
    """Negative flip rates (corrupted pairs, clean samples) of ``out`` against ``ref``."""
    cur = out.grid.align(ref.grid.ids).paired_with(ref.grid)[0]
    f = cur.figures()
    return f["negative_flips"], f["negative_flips_clean"]


#: The figures whose floors the benign variants calibrate (docs/spec.md §6, churn).
CALIBRATED = ("accuracy", "p_correct", "p_correct_clean", "negative_flips", "negative_flips_clean")
#: The option-order figures (docs/spec.md §4); their floors: :func:`order_floors`.
ORDER = ("circular_accuracy", "circular_accuracy_clean", "position_preference",
         "position_preference_clean", "order_interaction")  # fmt: skip
#: The benign variant held out of the option-order floors' calibration (reported against them).
HELD_OUT = "re-saved in bfloat16"
#: A floor is at least this many times the largest change a calibration variant made.
FLOOR_MARGIN = 2.0


def _worst(ref: Outputs, out: Outputs, names: tuple[str, ...]) -> dict[tuple[str, str], float]:
    """(level, figure) -> the largest worse-direction change of ``out`` against ``ref`` over
    the level's cases (the whole testbed), for the gated ``names``."""
    from benchc.gates.figures import figure, figures

    worst: dict[tuple[str, str], float] = {}
    cur_cases = cases(out)
    for key, (level, _scope, ev) in cases(ref).items():
        gated = {f.name for f in figures(level, gated_only=True)} if level != "vsi" else set()
        cur = cur_cases[key][2].align(ev.ids).paired_with(ev)[0]
        fb, fc = ev.figures(), cur.figures()
        for f in names:
            if f in gated:
                d = -figure(level, f).sign * (fc[f] - fb[f])
                worst[(level, f)] = max(worst.get((level, f), -np.inf), d)
    return worst


def order_floors(ref: Outputs, benign: list[tuple[str, Outputs]]) -> None:
    """The option-order floors' calibration: per gated (level, figure), the largest
    worse-direction change over the benign variants but :data:`HELD_OUT`, the floor that
    implies (:data:`FLOOR_MARGIN` x it, rounded up to 0.005), the floor in use, and the
    held-out variant's change against it."""
    import math

    from benchc.gates.figures import figure

    calib = [(n, _worst(ref, o, ORDER)) for n, o in benign if o is not ref and n != HELD_OUT]
    held = [_worst(ref, o, ORDER) for n, o in benign if n == HELD_OUT]
    print(f"| level | figure | largest benign change (calibration: {len(calib)} variants) | "
          f"implied floor | floor | {HELD_OUT} (held out) |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    keys = sorted({k for _, w in calib for k in w}, key=lambda k: (k[0] != "model", k))
    for level, f in keys:
        top = max(w[(level, f)] for _, w in calib)
        implied = max(0.005, math.ceil(FLOOR_MARGIN * max(top, 0.0) / 0.005 - 1e-9) * 0.005)
        floor = figure(level, f).floor
        out = f"{held[0][(level, f)]:+.4f}" if held else "-"
        flag = "" if not held or held[0][(level, f)] < floor else " (above the floor)"
        print(f"| {level} | {f} | {top:+.4f} | {implied:g} | {floor:g} | {out}{flag} |")


def calibration(ref: Outputs, benign: list[tuple[str, Outputs]]) -> None:
    """Each benign variant's largest worse-direction change of the churn figures at each level
    (over its cells or families; the whole testbed, not resampled), beside the default floor:
    what the floors are calibrated on."""
    from benchc.gates.figures import figure, figures

    print("| benign variant | level | " + " | ".join(CALIBRATED) + " |")
    print("|---|---|" + "---|" * len(CALIBRATED))
    base_cases = cases(ref)
    for name, out in benign:
        if out is ref:
            continue
        cur_cases = cases(out)
        for level in ("cell", "family", "model"):
            gated = {f.name for f in figures(level, gated_only=True)}
            worst: dict[str, float] = {}
            for key, (lv, _scope, ev) in base_cases.items():
                if lv != level:
                    continue
                cur = cur_cases[key][2].align(ev.ids).paired_with(ev)[0]
                fb, fc = ev.figures(), cur.figures()
                for f in CALIBRATED:
                    if f in gated:
                        d = -figure(level, f).sign * (fc[f] - fb[f])
                        worst[f] = max(worst.get(f, -np.inf), d)
            cells = [
                f"{worst[f]:+.4f} (floor {figure(level, f).floor:g})" if f in worst else "-"
                for f in CALIBRATED
            ]
            print(f"| {name} | {level} | " + " | ".join(cells) + " |")


#: One zoo member: (name, kind "benign" or "edit", strength, weight change, its outputs).
Variant = tuple[str, str, str, str, Outputs]


def zoo_variants(cfg: SuiteConfig, results_dir: Path, *, quick: bool = False) -> list[Variant]:
    """The reference model (first), its benign settings, then every edit of
    :data:`~benchc.testing.dev.checkpoints.EDITS` on its ladder (``quick``: the strongest
    rung only), each written as a checkpoint folder and run through the suite's model path."""
    ref = run_variant(cfg, vsi=False)
    variants: list[Variant] = [
        ("reference (itself)", "benign", "-", "0", ref),
        ("bfloat16 inference", "benign", "-", "-", run_variant(cfg, dtype="bfloat16", vsi=False)),
        ("batch size 1", "benign", "-", "-", run_variant(cfg, batch_size=1, vsi=False)),
        ("attention eager", "benign", "-", "-",
         run_variant(cfg, model_args={"attn_implementation": "eager"}, vsi=False)),
    ]  # fmt: skip
    source = Path(cfg.model)
    for e in EDITS:
        for s in e.strengths[-1:] if quick else e.strengths:
            folder = results_dir / "checkpoints" / f"{_slug(e.name)}-{s:g}"
            write_checkpoint(source, folder, e, s)
            out = run_variant(cfg, model=str(folder), vsi=False)
            kind = "benign" if e.benign else "edit"
            variants.append((e.name, kind, f"{s:g}", f"{weight_change(source, folder):.3g}", out))
    return variants


def zoo_config(args: argparse.Namespace) -> SuiteConfig:
    """The suite configuration the zoo runs under (the scripts' shared options)."""
    return SuiteConfig(
        model=args.model,
        dataset=args.dataset,
        corruptions=parse_corruptions(args.corruptions),
        severities=parse_severities(args.severities),
        results_dir=args.results_dir,
    )


def zoo_arguments(description: str) -> argparse.ArgumentParser:
    """The options every zoo script takes (grid, testbed, resamples, budget, seed)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--corruptions", default=CORRUPTIONS)
    ap.add_argument("--severities", default=SEVERITIES)
    ap.add_argument("--dataset", default=DEFAULT_DATASET, help="testbed (default: embedded)")
    ap.add_argument("--model", default=DEFAULT_MODEL, help="the reference checkpoint folder")
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--results-dir", type=Path, default=Path(".benchc/checkpoint-zoo"))
    ap.add_argument("--quick", action="store_true", help="one strength per edit (smoke run)")
    ap.add_argument("--seed", type=int, default=1)
    return ap


@dataclass(frozen=True)
class Zoo:
    """A zoo script's run: its options, every variant (the reference first), the budget the
    gates spend, the bootstrap resamples (rows of the testbed) and the models' wall time."""

    args: argparse.Namespace
    variants: list[Variant]
    budget: ErrorBudget
    rows: list[np.ndarray]
    seconds: float

    @property
    def ref(self) -> Outputs:
        return self.variants[0][4]


def run_zoo(description: str, *, jobs: bool = False, only: bool = False) -> Zoo:
    """Parse the zoo options (``jobs``: and ``--jobs``, processes that gate the variants;
    ``only``: and ``--only NAME``, the variants to gate), run every variant, draw the resamples
    (``--seed``)."""
    ap = zoo_arguments(description)
    if jobs:
        ap.add_argument("--jobs", type=int, default=1, help="processes gating the variants")
    if only:
        ap.add_argument(
            "--only",
            action="append",
            metavar="NAME",
            help="gate only this variant (repeatable; default: every one)",
        )
    args = ap.parse_args()
    t0 = time.perf_counter()
    variants = zoo_variants(zoo_config(args), args.results_dir, quick=args.quick)
    seconds = time.perf_counter() - t0
    ref = variants[0][4]
    rng = np.random.default_rng(args.seed)
    n = len(ref.grid.ids)
    rows = [rng.integers(0, n, n) for _ in range(args.resamples)]
    return Zoo(args, variants, budget_for(ref, args.budget), rows, seconds)


def main() -> None:
    zoo = run_zoo(__doc__.split("\n")[0])
    args, variants, ref, budget, rows = zoo.args, zoo.variants, zoo.ref, zoo.budget, zoo.rows
    n = len(ref.grid.ids)
    t0, t_models = time.perf_counter() - zoo.seconds, zoo.seconds
    print(f"# checkpoint zoo: {args.resamples} bootstrap resamples of the testbed ({n} samples, "
          f"{len(ref.grid.conditions)} cells: {args.corruptions} x {args.severities})")  # fmt: skip
    print(f"# {budget.describe()}")
    print()
    print(
        "| edit | kind | strength | weight change | Δ acc clean | Δ acc corrupted | Δ circ. "
        "corrupted | neg. flips corrupted | neg. flips clean | FAIL | UNRESOLVED | PASS | "
        "caught by (share of runs) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    f0 = ref.grid.figures()
    missed: list[str] = []
    alarms: list[str] = []
    meaningful = benign = 0
    for name, kind, strength, dw, out in variants:
        hits: Counter = Counter()
        verdicts: Counter = Counter()
        for r in rows:
            st = gate_statuses(resample(ref, r, r), resample(out, r, r), budget)
            verdict = "FAIL" if st["fail"] else "UNRESOLVED" if st["unresolved"] else "PASS"
            verdicts[verdict] += 1
            hits.update(set(st["fail"]) | set(st["unresolved"]))
        f = out.grid.figures()
        d_clean, d_corr = f["acc_clean"] - f0["acc_clean"], f["accuracy"] - f0["accuracy"]
        d_circ = f["circular_accuracy"] - f0["circular_accuracy"]
        nf, nf_clean = _flips(ref, out)
        ranked = sorted(hits.items(), key=lambda gc: (-gc[1], gc[0]))[:4]
        top = ", ".join(f"{g} {c / len(rows):.0%}" for g, c in ranked) or "-"
        print(f"| {name} | {kind} | {strength} | {dw} | {d_clean:+.3f} | {d_corr:+.3f} "
              f"| {d_circ:+.3f} | {nf:.3f} "
              f"| {nf_clean:.3f} | {verdicts['FAIL']} | {verdicts['UNRESOLVED']} "
              f"| {verdicts['PASS']} | {top} |", flush=True)  # fmt: skip
        label = f"{name} {strength}"
        if kind == "benign":
            benign += 1
            if verdicts["PASS"] < SHARE * len(rows):
                alarms.append(label)
        elif max(-d_clean, -d_corr, abs(d_circ)) >= MEANINGFUL - 1e-12:
            meaningful += 1
            if verdicts["FAIL"] + verdicts["UNRESOLVED"] < SHARE * len(rows):
                missed.append(label)
    t2 = time.perf_counter()
    print()
    benign_outputs = [(name, out) for name, kind, _, _, out in variants if kind == "benign"]
    calibration(ref, benign_outputs)
    print()
    order_floors(ref, benign_outputs)
    print()
    print(f"# edits losing >= {MEANINGFUL:g} of clean or corrupted accuracy or moving circular "
          f"accuracy by as much: {meaningful}; FAIL or "
          f"UNRESOLVED in >= {SHARE:.0%} of resamples: {meaningful - len(missed)}"
          + (f" (missed: {', '.join(missed)})" if missed else ""))  # fmt: skip
    passed = benign - len(alarms)
    print(f"# benign variants: {benign}; PASS in >= {SHARE:.0%} of resamples: {passed}"
          + (f" (alarms: {', '.join(alarms)})" if alarms else ""))  # fmt: skip
    print(f"# model runs {t_models:.0f} s, gate checks {t2 - t_models - t0:.0f} s")


if __name__ == "__main__":
    main()
