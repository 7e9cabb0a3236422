"""Gate power: how often the real gates fail for benign changes and catch structural mutants.

Runs the embedded tiny model and its zoo (``benchc.testing.dev.zoo``) through the gates that a
default ``pytest`` runs (cells, families, model level, VSI), on ``--resamples`` bootstrap
resamples of the embedded testbed and VSI set (sample ids drawn with replacement and relabelled;
the baseline is recorded per resample from the reference model's outputs on that resample):

* benign variants, each a real model run: bfloat16, another batch size, 1e-3 relative weight
  noise, the eager attention implementation, the checkpoint re-saved in bfloat16. Reported: the
  share of resamples in which *any* gate fails (the false-alarm rate; the run's budget is 1 %)
  and in which any gate is UNRESOLVED (a benign variant must never be: docs/spec.md §6).
* structural mutants, at several strengths: the vision-ignoring model (a projector hook, a real
  model run) and the output mutants (over-/under-confidence under corruption, confident when
  wrong, one family's fragility, a VSI-level vision-ignoring mutant), applied on top of the
  noisiest benign run so that detection is measured through realistic kernel noise. Reported:
  the share detected, the largest accuracy change they cause, and which gates caught them.

The reference measured in the same run is the reference model itself (fp32, its default batch
size): its own check against itself must pass in every resample. Model outputs are stored under
``--results-dir`` and reused on a rerun.

    python benchmarks/gate_power.py                       # docs/measurements.md (~15 min, 2 cores)
    python benchmarks/gate_power.py --resamples 3 --corruptions fog --quick   # a smoke run
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from benchc.gates import ErrorBudget, Payload, check, default_rules
from benchc.gates.evidence import Evidence, GridEvidence
from benchc.suite.cases import grid_evidence
from benchc.suite.config import (
    DEFAULT_DATASET,
    DEFAULT_MODEL,
    SuiteConfig,
    parse_corruptions,
    parse_severities,
)
from benchc.suite.payloads import family_cells
from benchc.suite.run import SuiteRun, default_corruption_workers
from benchc.suite.session import open_backend, open_dataset
from benchc.suite.vsi import vsi_arrays, vsi_evidence
from benchc.testing.dev import zoo


@dataclass
class Outputs:
    """One model variant's evidence on the testbed grid and on the VSI set."""

    grid: GridEvidence
    vsi: Evidence
    #: The VSI set's stored arrays (both supports; ``benchmarks/vsi_support.py`` reads them).
    vsi_arrays: dict | None = None


def run_variant(
    cfg: SuiteConfig,
    *,
    batch_size=None,
    dtype=None,
    hook=None,
    model=None,
    model_args=None,
    vsi: bool = True,
) -> Outputs:
    """The real model under ``cfg`` with one variant's settings (another checkpoint folder
    ``model``, ``model_args``), through the results store; ``vsi`` False skips the VSI set."""
    vcfg = replace(
        cfg, batch_size=batch_size, dtype=dtype, model=model or cfg.model,
        model_args={**cfg.model_args, **(model_args or {})},
    )  # fmt: skip
    backend = open_backend(vcfg)
    if hook is not None:
        backend = hook(backend)
    workers = default_corruption_workers(None)
    grid_run = SuiteRun(vcfg, open_dataset(vcfg), backend, corruption_workers=workers)
    grid = grid_evidence(grid_run, vcfg.conditions, order=True)
    if not vsi:
        return Outputs(grid, None)  # type: ignore[arg-type]
    vsi_cfg = replace(vcfg, dataset=cfg.resolved_vsi_dataset())
    vsi_run = SuiteRun(vsi_cfg, open_dataset(vsi_cfg), backend, corruption_workers=workers)
    arrays = vsi_arrays(vsi_run)
    return Outputs(grid, vsi_evidence(arrays, vsi_run.ids), arrays)


def cases(out: Outputs) -> dict[str, tuple[str, str, Evidence]]:
    """(level, scope, evidence) of every case the default suite runs."""
    ev = out.grid
    res = {f"cell:{k}": ("cell", k, ev.restrict([k])) for k in ev.conditions}
    for fam, cells in family_cells(ev.conditions).items():
        res[f"family:{fam}"] = ("family", fam, ev.restrict(cells))
    res["model"] = ("model", "model", ev)
    if out.vsi is not None:
        res["vsi"] = ("vsi", "vsi", out.vsi)
    return res


def budget_for(out: Outputs, alpha: float) -> ErrorBudget:
    return ErrorBudget.for_payloads(alpha, (_payload(*c) for c in cases(out).values()))


def _payload(level: str, scope: str, ev: Evidence, rules=None) -> Payload:
    rules = default_rules(level) if rules is None else rules  # type: ignore[arg-type]
    return Payload(scope, level, "m", "d", len(ev.ids), {}, rules, {}, ev)  # type: ignore[arg-type]


def gate_statuses(base: Outputs, cur: Outputs, budget: ErrorBudget) -> dict[str, list[str]]:
    """The gates that failed and those left unresolved, each as ``level:figure`` (cells
    pooled, so the table stays readable)."""
    out: dict[str, list[str]] = {"fail": [], "unresolved": []}
    cur_cases = cases(cur)
    for name, (level, scope, ev) in cases(base).items():
        b = _payload(level, scope, ev)
        c = _payload(level, scope, cur_cases[name][2], b.rules)
        for o in check(b, c, z_for=budget.z).outcomes:
            if o.status in out:
                key = f"{level}:{o.spec.name}" if level == "cell" else f"{name}:{o.spec.name}"
                out[o.status].append(key)
    return out


def failing_gates(base: Outputs, cur: Outputs, budget: ErrorBudget) -> list[str]:
    """Every failing gate, as ``level:figure`` (:func:`gate_statuses`)."""
    return gate_statuses(base, cur, budget)["fail"]


def resample(out: Outputs, grid_rows: np.ndarray, vsi_rows: np.ndarray) -> Outputs:
    def relabel(ev: Evidence, rows: np.ndarray) -> Evidence:
        return ev.take(rows, ids=[f"{ev.ids[i]}#{k}" for k, i in enumerate(rows)])

    vsi = None if out.vsi is None else relabel(out.vsi, vsi_rows)
    return Outputs(relabel(out.grid, grid_rows), vsi)  # type: ignore[arg-type]


def resaved_bf16(cfg: SuiteConfig, results_dir: Path) -> Path:
    """The reference checkpoint re-saved in bfloat16 (a real folder, written once)."""
    from benchc.testing.dev.checkpoints import edit, write_checkpoint

    return write_checkpoint(
        Path(cfg.model),
        results_dir / "checkpoints" / "resaved-bf16",
        edit("re-saved in bfloat16"),
        1,
    )


def logit_rms(a: Outputs, b: Outputs) -> float:
    d = (a.grid.logits - b.grid.logits).astype(np.float64)
    return float(np.sqrt(np.nanmean(d**2)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--resamples", type=int, default=20)
    ap.add_argument("--corruptions", default=None, help="subset of the grid (default: all 19)")
    ap.add_argument("--severities", default=None, help="subset of severities (default 1-5)")
    ap.add_argument("--dataset", default=DEFAULT_DATASET, help="testbed (default: embedded)")
    ap.add_argument("--vsi-dataset", default=None, help="VSI set (default: embedded)")
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--results-dir", type=Path, default=Path(".benchc/gate-power"))
    ap.add_argument("--quick", action="store_true", help="one strength per mutant (smoke run)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="gate only this variant (repeatable; the resamples stay the same)",
    )
    args = ap.parse_args()

    cfg = SuiteConfig(
        model=DEFAULT_MODEL,
        dataset=args.dataset,
        vsi_dataset=args.vsi_dataset,
        corruptions=parse_corruptions(args.corruptions),
        severities=parse_severities(args.severities),
        results_dir=args.results_dir,
    )
    t0 = time.perf_counter()
    ref = run_variant(cfg)
    benign = {
        "bfloat16": run_variant(cfg, dtype="bfloat16"),
        "batch size 1": run_variant(cfg, batch_size=1),
        "weight noise 1e-3": run_variant(cfg, hook=lambda b: zoo.weight_noise(b, 1e-3, seed=1)),
        "attention eager": run_variant(cfg, model_args={"attn_implementation": "eager"}),
        "re-saved in bfloat16": run_variant(cfg, model=str(resaved_bf16(cfg, args.results_dir))),
    }
    strengths = (0.1, 0.0) if not args.quick else (0.0,)
    hooked = {s: run_variant(cfg, hook=lambda b, s=s: zoo.vision_ignoring(b, s)) for s in strengths}
    t_models = time.perf_counter() - t0
    carrier_name = max(benign, key=lambda k: logit_rms(ref, benign[k]))
    carrier = benign[carrier_name]

    #: (name, kind, strength, the gate it is aimed at, outputs)
    variants: list[tuple[str, str, str, str, Outputs]] = [
        ("reference (itself)", "benign", "-", "-", ref)
    ]
    variants += [(name, "benign", "-", "-", out) for name, out in benign.items()]
    for s, out in hooked.items():
        name = "vision-ignoring LLM (projector x s)"
        variants.append((name, "mutant", f"{s:g}", "vsi:insensitive_fraction", out))
    for m in zoo.GRID_MUTANTS:
        for s in m.strengths if not args.quick else (m.meaningful,):
            out = Outputs(m.fn(carrier.grid, s), carrier.vsi)
            variants.append((m.name, "mutant", f"{s:g}", m.target, out))
    for m in zoo.VSI_MUTANTS:
        for s in m.strengths if not args.quick else (m.meaningful,):
            out = Outputs(carrier.grid, m.fn(carrier.vsi, s))
            variants.append((m.name, "mutant", f"{s:g}", m.target, out))

    if args.only:
        variants = [v for v in variants if v[0] in args.only]
    budget = budget_for(ref, args.budget)
    rng = np.random.default_rng(args.seed)
    n, nv = len(ref.grid.ids), len(ref.vsi.ids)
    rows = [(rng.integers(0, n, n), rng.integers(0, nv, nv)) for _ in range(args.resamples)]
    t1 = time.perf_counter()
    print(f"# gate power: {args.resamples} bootstrap resamples of the testbed ({n} samples, "
          f"{len(ref.grid.conditions)} cells) and the VSI set ({nv} samples)")  # fmt: skip
    print(f"# {budget.describe()}")
    print(f"# output mutants are applied on top of the noisiest benign run ({carrier_name}, "
          f"option-logit RMS change {logit_rms(ref, carrier):.4f} vs the reference)")  # fmt: skip
    print()
    print("| variant | kind | strength | runs failing any gate | runs UNRESOLVED (no gate failed) "
          "| aimed-at gate: runs it failed | accuracy change | logit RMS | caught by (share of "
          "runs) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    acc0 = ref.grid.figures()["accuracy"]
    benign_unresolved: list[str] = []
    for name, kind, strength, target, out in variants:
        hits: Counter = Counter()
        unresolved: Counter = Counter()
        n_fail = n_unres = 0
        for grid_rows, vsi_rows in rows:
            st = gate_statuses(resample(ref, grid_rows, vsi_rows),
                               resample(out, grid_rows, vsi_rows), budget)  # fmt: skip
            n_fail += bool(st["fail"])
            n_unres += bool(st["unresolved"]) and not st["fail"]
            hits.update(set(st["fail"]))
            if not st["fail"]:
                unresolved.update(set(st["unresolved"]))
        if kind == "benign" and unresolved:
            gates = ", ".join(f"{g} {c}/{len(rows)}" for g, c in sorted(unresolved.items()))
            benign_unresolved.append(f"{name}: {gates}")
        ranked = sorted(hits.items(), key=lambda gc: (-gc[1], gc[0]))[:4]  # ties by name
        top = ", ".join(f"{g} {c / len(rows):.0%}" for g, c in ranked) or "-"
        d_acc = out.grid.figures()["accuracy"] - acc0
        aimed = "-" if target == "-" else f"{target} {hits[target] / len(rows):.0%}"
        share = f"{n_fail}/{len(rows)} ({n_fail / len(rows):.0%})"
        unres = f"{n_unres}/{len(rows)}"
        rms = logit_rms(ref, out)
        print(f"| {name} | {kind} | {strength} | {share} | {unres} | {aimed} | {d_acc:+.3f} "
              f"| {rms:.4f} | {top} |", flush=True)  # fmt: skip
    t2 = time.perf_counter()
    print()
    if benign_unresolved:  # which gates a benign variant left unresolved, in how many runs
        print(f"# UNRESOLVED gates of benign variants: {'; '.join(benign_unresolved)}")
    print(
        f"# model runs {t_models:.0f} s, gate checks {t2 - t1:.0f} s "
        f"({(t2 - t1) / (len(variants) * len(rows)):.2f} s per variant x resample)"
    )


if __name__ == "__main__":
    main()
