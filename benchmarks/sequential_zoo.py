"""The checkpoint zoo under sequential gates: the fixed design against 3 and 5 looks.

Every variant of ``benchmarks/checkpoint_zoo.py`` (the reference itself, its benign settings,
every weight edit on its ladder: real checkpoint folders through the suite's model path) is
gated against the reference on ``--resamples`` bootstrap resamples of the testbed, three ways
at the same false-alarm budget:

* fixed: one look on every sample (today's gate, ``--looks 1``);
* 3 and 5 looks (``--looks 3`` / ``--looks 5``): look k gates the resample's first
  ``ceil(k N / K)`` samples (the sizes are fixed before look 1, as ``benchc plan`` schedules
  them) with the engine's own verdict (:func:`benchc.gates.engine.run_verdict`: O'Brien-
  Fleming-type alpha spending, early PASS by beta spending at P = 90 %); a FAIL or a PASS
  ends the design, the last look's verdict stands.

Printed per variant: FAIL / UNRESOLVED / INCONCLUSIVE / PASS counts of each design (an edit
counts as caught on anything but PASS: under ``--strict-gates`` each of those fails the
build), and the forward passes each sequential design spent to its decision, as a share of
the fixed design's (each sample costs the same forward passes: the clean image and every
cell). The last lines check issue 51's targets; the power at MDR_P of one gate (exact, by
:mod:`benchc.gates.spending`) is printed beside them.

    python benchmarks/sequential_zoo.py                    # docs/measurements.md (~15 min, 2 cores)
    python benchmarks/sequential_zoo.py --quick --resamples 3 --corruptions fog --severities 3
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from checkpoint_zoo import MEANINGFUL, SHARE, Variant, run_zoo
from gate_power import Outputs, _payload, cases, logit_rms, resample

from benchc.gates import ErrorBudget, check
from benchc.gates.budget import look_fractions
from benchc.gates.engine import run_verdict

#: The designs compared: their number of looks.
DESIGNS = (1, 3, 5)
#: Issue 51's targets: forward-pass shares (of the fixed design's) at 5 looks.
BENIGN_SHARE, EDIT_SHARE = 0.70, 0.60
#: A benign variant carries real noise when its option logits move by more than this (RMS):
#: bfloat16 rounding moves them by ~1e-2, another batch size or attention kernel by ~1e-6.
REAL_NOISE = 1e-3


@dataclass(frozen=True)
class Decision:
    """One design's verdict on one resample: the state, the look it stopped at, the samples."""

    state: str
    look: int
    n: int


def look_sizes(total: int, looks: int) -> list[int]:
    """The samples of each look, fixed before look 1 (:func:`look_fractions`' schedule)."""
    return [math.ceil(j * total / looks) for j in range(1, looks + 1)]


def decide(base: Outputs, cur: Outputs, looks: int, budget: ErrorBudget) -> Decision:
    """The design of ``looks`` looks run on ``cur`` against ``base`` (same samples, same
    order): each look's records through the engine's verdict, until it decides."""
    total = len(base.grid.ids)
    base_cases = cases(base)
    payloads = {name: _payload(*c) for name, c in base_cases.items()}
    for k, n in enumerate(look_sizes(total, looks), 1):
        fractions = look_fractions(n, total, looks, k) if looks > 1 else None
        spent = ErrorBudget(budget.alpha, budget.gates, looks=looks, look=k, fractions=fractions)
        head = Outputs(cur.grid.take(np.arange(n), ids=cur.grid.ids[:n]), None)  # type: ignore[arg-type]
        records = []
        for name, (level, scope, ev) in cases(head).items():
            b = payloads[name]
            c = _payload(level, scope, ev, b.rules)
            records += [o.to_dict(name) for o in check(b, c, z_for=spent.z).outcomes]
        state = run_verdict(records, budget=spent).state
        if state in ("fail", "pass") or k == looks:
            return Decision(state, k, n)
    raise AssertionError("unreachable: the last look decides")


def _bit_identical(a: Outputs, b: Outputs) -> bool:
    x, y = a.grid.arrays(), b.grid.arrays()
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)


def _power_at_mdr_p(looks: int, alpha: float) -> tuple[float, float]:
    """One gate's power at the fixed design's MDR_90 (same maximum n), and at its own MDR_P."""
    from benchc.gates.design import Design
    from benchc.gates.spending import power

    d = Design.evenly(1000, looks)
    g = d.gate(alpha, 1.0 / math.sqrt(1000))
    at_fixed = power(d.fractions, g.mdr.efficacy, g.fixed_mdr_p / g.se_full, g.mdr.futility)
    return at_fixed, g.mdr_p / g.fixed_mdr_p


#: What the pool's workers read (set before the fork).
_SHARED: dict = {}


def _decisions(i: int) -> dict[int, list[Decision]]:
    """Variant ``i`` against the reference on every resample, by each design."""
    ref, rows, budget = _SHARED["ref"], _SHARED["rows"], _SHARED["budget"]
    out = _SHARED["variants"][i][4]
    return {k: [decide(resample(ref, r, r), resample(out, r, r), k, budget) for r in rows]
            for k in DESIGNS}  # fmt: skip


class Tally:
    """The table's rows, printed as the variants finish, and what they say of the targets."""

    def __init__(self, ref: Outputs, total: int) -> None:
        self.ref, self.total, self.f0 = ref, total, ref.grid.figures()
        self.problems: list[str] = []
        self.shares: dict[str, list[float]] = {"benign": [], "edit": []}

    def row(self, variant: Variant, decided: dict[int, list[Decision]]) -> None:
        name, kind, strength, _dw, out = variant
        counts = {k: Counter(d.state.upper() for d in ds) for k, ds in decided.items()}
        share = {k: float(np.mean([d.n / self.total for d in ds])) for k, ds in decided.items()}
        stops = Counter(d.look for d in decided[5])
        f = out.grid.figures()
        d_clean = f["acc_clean"] - self.f0["acc_clean"]
        d_corr = f["accuracy"] - self.f0["accuracy"]
        fup = {k: "/".join(str(c[s]) for s in ("FAIL", "UNRESOLVED", "INCONCLUSIVE", "PASS"))
               for k, c in counts.items()}  # fmt: skip
        at = ", ".join(f"{lk}: {c}" for lk, c in sorted(stops.items()))
        print(f"| {name} | {kind} | {strength} | {d_clean:+.3f} | {d_corr:+.3f} | {fup[1]} "
              f"| {fup[3]} | {share[3]:.2f} | {fup[5]} | {share[5]:.2f} | {at} |",
              flush=True)  # fmt: skip
        label = f"{name} {strength}".strip(" -")
        identical = _bit_identical(self.ref, out)
        self.problems += _misses(label, kind, identical, decided, (d_clean, d_corr))
        if kind == "benign" and logit_rms(self.ref, out) > REAL_NOISE:
            self.shares["benign"].append(share[5])
        elif kind == "edit" and max(-d_clean, -d_corr) >= MEANINGFUL - 1e-12:
            self.shares["edit"].append(share[5])


def main() -> None:
    zoo = run_zoo(__doc__.split("\n")[0], jobs=True, only=True)
    args, variants, ref, budget, rows = zoo.args, zoo.variants, zoo.ref, zoo.budget, zoo.rows
    t0, t_models = time.perf_counter() - zoo.seconds, zoo.seconds
    total = len(ref.grid.ids)
    print(f"# sequential zoo: {args.resamples} bootstrap resamples of the testbed ({total} "
          f"samples, {len(ref.grid.conditions)} cells: {args.corruptions} x {args.severities}); "
          f"look sizes 3: {look_sizes(total, 3)}, 5: {look_sizes(total, 5)}")  # fmt: skip
    print(f"# {budget.describe()}")
    print()
    print("| edit | kind | strength | Δ acc clean | Δ acc corrupted | fixed F/U/I/P "
          "| 3 looks F/U/I/P | 3 looks passes | 5 looks F/U/I/P | 5 looks passes "
          "| 5 looks: stopped at look |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    tally = Tally(ref, total)
    _SHARED.update(ref=ref, variants=variants, rows=rows, budget=budget)
    ctx = multiprocessing.get_context("fork")  # the workers read the variants as they are
    with ctx.Pool(args.jobs) as pool:
        chosen = [i for i, v in enumerate(variants) if not args.only or v[0] in args.only]
        every = pool.imap(_decisions, chosen)
        for i, decided in zip(chosen, every, strict=True):
            tally.row(variants[i], decided)
    problems, shares = tally.problems, tally.shares
    t_gates = time.perf_counter() - t0 - t_models
    print()
    for kind, target in (("benign", BENIGN_SHARE), ("edit", EDIT_SHARE)):
        got = float(np.mean(shares[kind])) if shares[kind] else float("nan")
        what = (f"benign variants with real noise (logit RMS > {REAL_NOISE:g})" if kind == "benign"
                else f"edits costing >= {MEANINGFUL:g}")  # fmt: skip
        met = "met" if got <= target else "MISSED"
        print(f"# {what}: mean forward passes at 5 looks {got:.2f} of the fixed design's "
              f"(target <= {target:.2f}: {met}; {len(shares[kind])} variants)")  # fmt: skip
        if got > target:
            problems.append(f"{what}: forward-pass share {got:.2f} > {target:.2f}")
    alpha = budget.alpha_for("model")
    for looks in (3, 5):
        p, ratio = _power_at_mdr_p(looks, alpha)
        print(f"# one gate at a model-level share ({alpha:.2e}): power at the fixed design's "
              f"MDR_90 with {looks} looks {p:.3f} (fixed 0.900); MDR_90 {ratio:.3f}x the "
              "fixed design's")  # fmt: skip
    print(f"# targets missed: {len(problems)}" + "".join(f"\n#   - {p}" for p in problems))
    print(f"# model runs {t_models:.0f} s, gate checks {t_gates:.0f} s")


def _misses(
    label: str,
    kind: str,
    identical: bool,
    decided: dict[int, list[Decision]],
    deltas: tuple[float, float],
) -> list[str]:
    """Issue 51's per-variant targets this variant misses (one line each)."""
    out: list[str] = []
    fixed = decided[1]
    for k in DESIGNS[1:]:
        seq = decided[k]
        if kind == "benign" and identical and any(d.look != 1 or d.state != "pass" for d in seq):
            out.append(f"{label}: bit-identical, not PASS at look 1 of {k} in every resample")
        if kind == "benign" and any(d.state == "fail" for d in seq):
            out.append(f"{label}: benign, FAIL with {k} looks")
        if kind == "benign":
            both = [s for f, s in zip(fixed, seq, strict=True) if f.state == "pass"]
            passed = sum(s.state == "pass" for s in both)
            if both and passed < SHARE * len(both):
                out.append(f"{label}: PASS in {passed} of the {len(both)} resamples the fixed "
                           f"design passes ({k} looks)")  # fmt: skip
        if kind == "edit" and max(-deltas[0], -deltas[1]) >= MEANINGFUL - 1e-12:
            caught = sum(d.state != "pass" for d in seq)
            if caught < SHARE * len(seq):
                out.append(f"{label}: FAIL or UNRESOLVED in {caught} of {len(seq)} ({k} looks)")
    return out


if __name__ == "__main__":
    main()
