"""A sequential gate design (``--looks K``): look sizes, each gate's bounds, each look's decision.

The run's false-alarm budget is split over gates as today (weighted Bonferroni,
:class:`benchc.gates.budget.ErrorBudget` with one look); each gate then spends *its* alpha over
the looks by a Lan-DeMets spending function (:mod:`benchc.gates.spending`), exactly. Per gate
the probability of ever failing under no change is at most its alpha whatever the other gates
and whatever stops the run early, so the union over gates and looks is at most the budget.

At look k of K, with the change ``worse`` (in the figure's unit, positive = worse) and the run's
own paired SE on the samples used so far, a gate

* **fails** when ``worse > max(floor, c_k SE)`` (today's rule with the look's bound);
* is **futile** when ``worse < MDR_P - g_k SE``: ``g_k = drift sqrt(t_k) - a_k`` is how many SEs
  below MDR_P the beta-spending bound ``a_k`` lies, so a gate whose true change is MDR_P stops
  there with the probability beta spending gave that look, at the SE the run actually has (with
  the planned SE this is ``Z_k < a_k`` exactly);
* else continues; at the last look it is **unresolved**. ``a_K = c_K`` on the planned SE, so
  only a run whose own SE is wider than planned (samples moved both ways) leaves a gap there.

The run FAILs at the first look where a gate fails, PASSes at the first look where every gate
is futile ("this design fails a regression of MDR_P with probability >= P"), and at the last
look is UNRESOLVED while a gate is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.special import ndtr, ndtri, stdtrit

from benchc.gates.spending import MdrP, efficacy_bounds, expected_fraction, mdr_p

FAIL, CONTINUE, FUTILE, UNRESOLVED = "fail", "continue", "futile", "unresolved"
NAMES = {"obf": "O'Brien-Fleming", "pocock": "Pocock"}


@lru_cache(maxsize=256)
def _efficacy(fractions: tuple[float, ...], alpha: float, spending: str) -> np.ndarray:
    out = efficacy_bounds(fractions, alpha, spending)
    out.flags.writeable = False
    return out


@lru_cache(maxsize=1024)
def _mdr(
    t: tuple[float, ...], alpha: float, spending: str, beta_spending: str, power: float,
    se_full: float, floor: float, room: float,
) -> MdrP:  # fmt: skip
    """MDR_P once per distinct gate (a run has many gates of few kinds)."""
    c = _efficacy(t, alpha, spending)
    return mdr_p(t, c, se_full, floor, power=power, room=room, spending=beta_spending)


@dataclass(frozen=True)
class GateDesign:
    """One gate's plan: its alpha, the paired SE expected on the design's samples under no
    change (``se_full``: SE_null at the last look), its floor and room, its z bounds and
    MDR_P (with the floor folded in: :func:`benchc.gates.spending.mdr_p`)."""

    name: str
    alpha: float
    se_full: float
    floor: float
    fractions: np.ndarray
    efficacy: np.ndarray
    mdr: MdrP

    @property
    def mdr_p(self) -> float:
        return self.mdr.value

    @property
    def fixed_mdr(self) -> float:
        """Today's MDR of this gate on all the samples: ``max(floor, z SE)`` (about 50 %)."""
        return max(self.floor, float(-ndtri(self.alpha)) * self.se_full)

    @property
    def fixed_mdr_p(self) -> float:
        """The fixed design's (one look's) MDR_P: ``max(floor, z SE) + ndtri(P) SE``."""
        return self.fixed_mdr + float(ndtri(self.mdr.power)) * self.se_full

    @property
    def margin(self) -> np.ndarray:
        """``g_k``: SEs between MDR_P and the futility bound per look (0 with SE 0)."""
        if not math.isfinite(self.mdr.drift):
            return np.zeros_like(self.efficacy)
        return self.mdr.drift * np.sqrt(self.fractions) - self.mdr.futility

    def bound(self, look: int, n: int | None = None) -> float:
        """The look's efficacy bound in SEs: ``c_k``, or with ``n`` (the samples used, SE
        estimated from them) the Student-t quantile with n - 1 df of the same one-sided tail
        (an SE estimated from the data makes ``worse / SE`` t-like: at z 3.8 on 333 samples
        the plug-in z's tail is 1.2 times the spent alpha)."""
        c = float(self.efficacy[look - 1])
        return c if n is None else float(-stdtrit(n - 1, ndtr(-c)))

    def fail_above(self, look: int, se: float | np.ndarray, n: int | None = None) -> np.ndarray:
        """The change above which this gate fails at ``look`` (1-based) with paired SE ``se``
        (``n``: studentised, :meth:`bound`)."""
        return np.maximum(self.floor, self.bound(look, n) * np.asarray(se, dtype=float))

    def pass_below(self, look: int, se: float | np.ndarray, n: int | None = None) -> np.ndarray:
        """The change below which this gate is futile at ``look`` with paired SE ``se``. The
        last look decides as a fixed gate does: below the bound at the *planned* SE (where
        ``MDR_P - g_K SE`` meets it), so a change between that and this run's own, wider
        failing bound is UNRESOLVED (beyond what the design resolves) and a smaller one PASSes
        however wide the run's SE (with it, ``MDR_P - g_K SE`` would leave benign noise
        UNRESOLVED where a fixed gate PASSes; docs/guides/sequential.md)."""
        se = np.asarray(se, dtype=float)
        if look == self.efficacy.size:
            planned = self.fail_above(look, self.planned_se(look), n)
            return np.broadcast_to(planned, se.shape).astype(float)
        return self.mdr_p - float(self.margin[look - 1]) * se

    def planned_se(self, look: int) -> float:
        return self.se_full / math.sqrt(self.fractions[look - 1])

    def resolve_n(self, n: int, worse: float, se: float) -> int | None:
        """Samples at which this change, at the run's paired variance (SE ~ 1/sqrt(n)), would
        fail (``worse > c_K SE'``): at the last look a change beyond the planned bound resolves
        only by failing (:meth:`pass_below`). None when it cannot (at or below the floor)."""
        c = self.efficacy[-1]
        if worse <= self.floor or worse <= 0:
            return None
        return max(n, math.floor(n * (c * se / worse) ** 2) + 1)


@dataclass(frozen=True)
class LookDecision:
    """One look's states per gate and the run's verdict: FAIL, PASS, CONTINUE or UNRESOLVED."""

    look: int
    looks: int
    states: tuple[str, ...]
    verdict: str
    power: float
    unreachable: tuple[str, ...] = ()
    resolve: tuple[int | None, ...] = field(default=())

    def message(self) -> str:
        where = f"look {self.look} of {self.looks}"
        if self.verdict == "FAIL":
            return f"FAIL at {where}: {self.states.count(FAIL)} gate(s) crossed their bound"
        if self.verdict == "PASS":
            text = (
                f"PASS: this design fails a regression of MDR_{self.power:.0%} with probability "
                f">= {self.power:.0%}; stopped at {where}"
            )
            if self.unreachable:
                text += f" (not for {', '.join(self.unreachable)}: their floor makes P unreachable)"
            return text
        if self.verdict == "UNRESOLVED":
            n = sum(s == UNRESOLVED for s in self.states)
            return f"UNRESOLVED at {where}: {n} gate(s) neither failed nor ruled out MDR_P"
        return f"CONTINUE after {where}: {self.states.count(CONTINUE)} gate(s) undecided"


def states(
    gates: Sequence[GateDesign],
    look: int,
    worse: np.ndarray,
    se: np.ndarray,
    n: int | None = None,
) -> np.ndarray:
    """Per gate (last axis) and draw: 0 continue, 1 fail, 2 futile (vectorised; the one rule
    :meth:`Design.decide` and :mod:`benchc.gates.seqsim` both apply). ``n``: the samples used,
    to studentise the bounds (:meth:`GateDesign.bound`); None: z bounds."""
    fail = np.stack([g.fail_above(look, se[..., i], n) for i, g in enumerate(gates)], -1)
    futile = np.stack([g.pass_below(look, se[..., i], n) for i, g in enumerate(gates)], -1)
    last = bool(gates) and look == gates[0].efficacy.size  # decides: not above is PASS
    below = worse <= futile if last else worse < futile
    return np.where(worse > fail, 1, np.where(below, 2, 0))


@dataclass(frozen=True)
class Design:
    """``sizes``: the samples used by each look (cumulative, fixed before look 1);
    ``spending``: alpha spending (``obf`` default, ``pocock``); ``beta_spending``: of the
    futility bounds; ``power``: P of MDR_P; ``studentize``: judge each look on Student-t bounds
    with the samples used less one as df (:meth:`GateDesign.bound`), for SEs estimated from few
    samples. Off by default: one look is then today's fixed gate, bit for bit."""

    sizes: tuple[int, ...]
    spending: str = "obf"
    beta_spending: str = "obf"
    power: float = 0.9
    studentize: bool = False

    def __post_init__(self) -> None:
        if not self.sizes or any(np.diff(self.sizes) <= 0):
            raise ValueError(f"look sizes must rise strictly, got {self.sizes}")
        if self.sizes[0] < 1:
            raise ValueError(f"a look needs samples, got {self.sizes}")
        for s in (self.spending, self.beta_spending):
            if s not in NAMES:
                raise ValueError(f"unknown spending {s!r}: one of {sorted(NAMES)}")

    @classmethod
    def evenly(cls, n: int, looks: int, **kw: object) -> Design:
        """``looks`` looks of about ``n / looks`` samples each, the last on all ``n``."""
        return cls(tuple(round(n * k / looks) for k in range(1, looks + 1)), **kw)  # type: ignore[arg-type]

    @property
    def looks(self) -> int:
        return len(self.sizes)

    @property
    def fractions(self) -> tuple[float, ...]:
        n = self.sizes[-1]
        return (*(s / n for s in self.sizes[:-1]), 1.0)

    def used(self, samples: Sequence[int]) -> Design:
        """The design with the samples the looks so far actually used: a look's information
        fraction comes from them (over the planned last look's samples); the last look spends
        all that is left whatever it uses. A look's bounds depend only on its own and earlier
        fractions, so those already decided stand."""
        sizes = list(self.sizes)
        done = min(len(samples), self.looks - 1)
        sizes[:done] = samples[:done]
        return Design(tuple(sizes), self.spending, self.beta_spending, self.power, self.studentize)

    def gate(
        self, alpha: float, se_full: float, floor: float = 0.0, room: float = math.inf,
        name: str = "",
    ) -> GateDesign:  # fmt: skip
        """One gate's plan from its share of the budget (``alpha``), the SE expected on all the
        design's samples under no change, its floor and the room its figure has left."""
        t = self.fractions
        c = _efficacy(t, alpha, self.spending)
        m = _mdr(t, alpha, self.spending, self.beta_spending, self.power, se_full, floor, room)
        return GateDesign(name, alpha, se_full, floor, np.asarray(t), c, m)

    def decide(
        self,
        look: int,
        gates: Sequence[GateDesign],
        worse: Sequence[float],
        se: Sequence[float],
        n: int | None = None,
    ) -> LookDecision:
        """Look ``look``'s verdict from each gate's change (worse way positive) and its paired
        SE on the samples used; ``n``: those samples (default the look's planned size), for
        the unresolved gates' resolve_n and, under ``studentize``, the look's t bounds."""
        if not 1 <= look <= self.looks:
            raise ValueError(f"look {look} outside 1..{self.looks}")
        w, s = np.asarray(worse, dtype=float), np.asarray(se, dtype=float)
        n = self.sizes[look - 1] if n is None else n
        code = states(gates, look, w, s, n if self.studentize else None)
        last = look == self.looks
        names = {0: UNRESOLVED if last else CONTINUE, 1: FAIL, 2: FUTILE}
        st = tuple(names[int(x)] for x in code)
        verdict = (
            "FAIL" if FAIL in st
            else "PASS" if all(x == FUTILE for x in st)
            else "UNRESOLVED" if last
            else "CONTINUE"
        )  # fmt: skip
        resolve = tuple(
            g.resolve_n(n, float(w[i]), float(s[i])) if x == UNRESOLVED else None
            for i, (g, x) in enumerate(zip(gates, st, strict=True))
        )
        unreachable = tuple(
            g.name or f"gate {i}" for i, g in enumerate(gates) if not g.mdr.reachable
        )
        return LookDecision(look, self.looks, st, verdict, self.power, unreachable, resolve)


def _row(xs: Sequence[float], fmt: str = ".4g") -> str:
    return ", ".join(format(float(x), fmt) for x in xs)


def schedule_lines(
    design: Design,
    gates: Sequence[GateDesign],
    *,
    run: Sequence[tuple[str, float, float]] = (),
) -> list[str]:
    """What ``benchc plan`` prints for a sequential design: samples per look, each gate's bounds
    (z and change at the planned SE), MDR_P beside the fixed design's MDR and MDR_P, and the
    expected share of forward passes under no change and under MDR_P (each gate alone, exact).
    ``run``: run-level lines the caller simulated (:func:`benchc.gates.seqsim.run_shares`):
    (label, share under no change, share under MDR_P)."""
    p = f"{design.power:.0%}"
    lines = [
        f"sequential gate: {design.looks} looks, {NAMES[design.spending]}-type alpha spending "
        f"(Lan-DeMets, exact), early PASS by {NAMES[design.beta_spending]}-type beta spending "
        f"at P = {p} (non-binding: the false-alarm budget is untouched)",
        f"samples per look: {', '.join(map(str, design.sizes))} "
        f"(information {_row(design.fractions, '.2f')})",
    ]
    t = design.fractions
    for i, g in enumerate(gates):
        se = [g.planned_se(k) for k in range(1, design.looks + 1)]
        fail = [float(g.fail_above(k, se[k - 1])) for k in range(1, design.looks + 1)]
        ok = [float(g.pass_below(k, se[k - 1])) for k in range(1, design.looks + 1)]
        drift = g.mdr.drift if math.isfinite(g.mdr.drift) else 50.0
        e0 = expected_fraction(t, g.mdr.efficacy, g.mdr.futility, 0.0)
        e1 = expected_fraction(t, g.mdr.efficacy, g.mdr.futility, drift)
        lines += [
            f"{g.name or f'gate {i}'} (alpha {g.alpha:.3g}): FAIL above z {_row(g.efficacy, '.3f')}"
            f" = change {_row(fail)}; PASS below change {_row(ok)}",
            f"    MDR_{p} {g.mdr_p:.4g} (fixed design: MDR_{p} {g.fixed_mdr_p:.4g}, today's MDR "
            f"{g.fixed_mdr:.4g}); forward passes {e0:.2f} of the fixed design's under no "
            f"change, {e1:.2f} under MDR_{p}",
        ]
        if not g.mdr.reachable:
            lines.append(f"    {g.mdr.reason}")
    for label, e0, e1 in run:
        lines.append(
            f"run ({label}): forward passes {e0:.2f} of the fixed design's under no change, "
            f"{e1:.2f} with every gate at its MDR_{p}"
        )
    return lines


__all__ = [
    "CONTINUE",
    "FAIL",
    "FUTILE",
    "UNRESOLVED",
    "Design",
    "GateDesign",
    "LookDecision",
    "schedule_lines",
    "states",
]
