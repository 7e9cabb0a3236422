"""Group-sequential boundaries for one paired gate: Lan-DeMets spending, exactly integrated.

A gate's statistic at look k is ``Z_k = worse_k / SE_k``, the paired change over the samples
used so far in paired SEs. Over looks at information fractions ``t_1 < ... < t_K = 1`` (samples
used / the design's samples) it behaves like Brownian motion: ``Z_k sqrt(t_k)`` has independent
increments, mean ``drift * t_k``, variance ``t_k``. Under no change (drift 0):

* **efficacy** bounds ``c_k`` spend the gate's one-sided alpha over looks by a spending function
  ``alpha(t)``: ``P(Z crosses some c_j, j <= k) = alpha(t_k)``, exactly (recursive numerical
  integration: Armitage, McPherson & Rowe 1969; Jennison & Turnbull 2000, ch. 19), computed
  ignoring any futility bound, so early PASS never spends false-alarm budget (non-binding);
* **futility** bounds ``a_k`` spend beta the same way under the alternative ``drift``:
  ``P(stop below some a_j, j <= k | drift)`` follows ``beta(t_k)`` (the efficacy bounds
  stopping too), the last one forced to ``a_K = c_K`` so the last look decides;
* **MDR_P** (:func:`mdr_p`) is the change whose drift makes that design's power (futility
  obeyed) exactly P: the drift at which beta spending lands on ``a_K = c_K`` by itself.

K = 1 reproduces the fixed design bit for bit: ``c_1 = -ndtri(alpha)``, ``MDR_P = max(floor, c
SE) + ndtri(P) SE``. Pure numpy/scipy; no ``scipy.stats`` (its import costs every run 0.7 s).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike
from scipy.integrate import simpson
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

Spending = Callable[[ArrayLike, float], np.ndarray]

#: Grid points per look for the integration (Simpson; error below 1e-9 on a 20-SD span).
GRID = 401
#: Half-width of the integrated region around the statistic's mean, in SDs.
SPAN = 10.0
_SQRT_2PI = math.sqrt(2.0 * math.pi)


def obrien_fleming(t: ArrayLike, alpha: float) -> np.ndarray:
    """Lan-DeMets O'Brien-Fleming type, one-sided: ``2 (1 - Phi(z_{1-alpha/2} / sqrt t))``
    (the two-sided form at level 2 alpha, as standard), exactly ``alpha`` at ``t >= 1``. Spends
    almost nothing early, so the last look keeps nearly the fixed design's bound."""
    t = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        out = 2.0 * ndtr(ndtri(alpha / 2.0) / np.sqrt(np.where(t > 0, t, np.nan)))
    out = np.where(t > 0, out, 0.0)
    return np.where(t >= 1.0, alpha, out)


def pocock(t: ArrayLike, alpha: float) -> np.ndarray:
    """Lan-DeMets Pocock type: ``alpha ln(1 + (e - 1) t)``, exactly ``alpha`` at ``t >= 1``.
    Nearly equal bounds at every look: earlier stops, a larger last bound."""
    t = np.clip(np.asarray(t, dtype=float), 0.0, None)
    return np.where(t >= 1.0, alpha, alpha * np.log1p((math.e - 1.0) * t))


SPENDING: dict[str, Spending] = {"obf": obrien_fleming, "pocock": pocock}


def _pdf(x: np.ndarray) -> np.ndarray:
    return np.exp(-0.5 * x * x) / _SQRT_2PI


@dataclass(frozen=True)
class _Look:
    """The sub-density of ``Z_k`` on the paths still running after look k (grid, values)."""

    t: float
    grid: np.ndarray
    dens: np.ndarray

    def _shift(self, t_next: float, drift: float) -> tuple[np.ndarray, float]:
        dt = t_next - self.t
        return self.grid * math.sqrt(self.t) + drift * dt, math.sqrt(dt)

    def above(self, t_next: float, c: float, drift: float) -> float:
        """P(still running, then ``Z`` at ``t_next`` above ``c``)."""
        if self.grid.size == 0:
            return 0.0
        m, s = self._shift(t_next, drift)
        return float(simpson(self.dens * ndtr((m - c * math.sqrt(t_next)) / s), x=self.grid))

    def below(self, t_next: float, a: float, drift: float) -> float:
        """P(still running, then ``Z`` at ``t_next`` below ``a``)."""
        if self.grid.size == 0 or a == -math.inf:
            return 0.0
        m, s = self._shift(t_next, drift)
        return float(simpson(self.dens * ndtr((a * math.sqrt(t_next) - m) / s), x=self.grid))

    def mass(self) -> float:
        return float(simpson(self.dens, x=self.grid)) if self.grid.size else 0.0

    def step(self, t_next: float, lo: float, hi: float, drift: float) -> _Look:
        """The sub-density at ``t_next`` on the paths that continue there (``lo < Z < hi``)."""
        mu = drift * math.sqrt(t_next)
        lo, hi = max(lo, mu - SPAN), min(hi, mu + SPAN)
        if self.grid.size == 0 or lo >= hi:
            return _Look(t_next, np.empty(0), np.empty(0))
        y = np.linspace(lo, hi, GRID)
        m, s = self._shift(t_next, drift)
        st = math.sqrt(t_next)
        kern = _pdf((y[:, None] * st - m[None, :]) / s) * (st / s)
        return _Look(t_next, y, simpson(kern * self.dens[None, :], x=self.grid, axis=1))


def _first(t: float, lo: float, hi: float, drift: float) -> _Look:
    mu = drift * math.sqrt(t)
    lo, hi = max(lo, mu - SPAN), min(hi, mu + SPAN)
    if lo >= hi:
        return _Look(t, np.empty(0), np.empty(0))
    y = np.linspace(lo, hi, GRID)
    return _Look(t, y, _pdf(y - mu))


def _fractions(fractions: Sequence[float]) -> np.ndarray:
    t = np.asarray(fractions, dtype=float)
    if t.ndim != 1 or t.size == 0 or t[-1] != 1.0 or np.any(np.diff(t) <= 0) or t[0] <= 0:
        raise ValueError(f"information fractions must rise strictly to 1, got {fractions}")
    return t


def crossing(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    futility: Sequence[float] | None,
    drift: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Per look, P(stop there above ``efficacy``) and P(stop there below ``futility``) at
    ``drift``; ``futility`` None: no futility stop (both bounds are on the z scale)."""
    t = _fractions(fractions)
    c = np.asarray(efficacy, dtype=float)
    a = np.full(t.size, -np.inf) if futility is None else np.asarray(futility, dtype=float)
    up, down = np.zeros(t.size), np.zeros(t.size)
    mu = drift * math.sqrt(t[0])
    up[0], down[0] = ndtr(mu - c[0]), ndtr(a[0] - mu)
    look = _first(t[0], a[0], c[0], drift)
    for k in range(1, t.size):
        up[k] = look.above(t[k], c[k], drift)
        down[k] = look.below(t[k], min(a[k], c[k]), drift)
        if k < t.size - 1:
            look = look.step(t[k], a[k], c[k], drift)
    return up, down


def efficacy_bounds(
    fractions: Sequence[float], alpha: float, spending: str | Spending = "obf"
) -> np.ndarray:
    """Upper z bounds ``c_1..c_K`` with ``P(cross by look k | no change) = alpha(t_k)``,
    exactly. Each ``c_k`` is bracketed analytically (``-ndtri(alpha(t_k)) <= c_k <=
    -ndtri(alpha(t_k) - alpha(t_{k-1}))``) and solved on the log of its crossing probability,
    so a Bonferroni share of 1e-6 is as accurate as 0.025."""
    t = _fractions(fractions)
    spend = SPENDING[spending] if isinstance(spending, str) else spending
    cum = np.asarray(spend(t, alpha), dtype=float)
    inc = np.diff(cum, prepend=0.0)
    if np.any(inc <= 0):
        raise ValueError(f"spending function must rise strictly over {fractions}")
    c = np.empty(t.size)
    c[0] = -ndtri(inc[0])
    look = _first(t[0], -np.inf, c[0], 0.0)
    for k in range(1, t.size):
        target = math.log(inc[k])

        def f(x: float, k: int = k, look: _Look = look, target: float = target) -> float:
            return math.log(max(look.above(t[k], x, 0.0), 1e-300)) - target

        lo, hi = -ndtri(cum[k]) - 0.5, -ndtri(inc[k]) + 0.5
        c[k] = brentq(f, lo, hi, xtol=1e-10)
        if k < t.size - 1:
            look = look.step(t[k], -np.inf, c[k], 0.0)
    return c


def futility_bounds(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    beta: float,
    drift: float,
    spending: str | Spending = "obf",
) -> np.ndarray:
    """Lower z bounds ``a_1..a_K`` (non-binding): ``a_k`` spends ``beta(t_k) - beta(t_{k-1})``
    of stopping below it at ``drift`` on the paths that neither bound stopped before; never
    above ``c_k`` (clamped: the look then decides every path), and ``a_K = c_K`` whatever beta
    is left, so the last look decides. The power this gives is :func:`power` with these bounds
    (exactly ``1 - beta`` at the drift :func:`solve_drift` finds)."""
    return _futility_pass(fractions, efficacy, beta, drift, spending)[0]


def _futility_pass(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    beta: float,
    drift: float,
    spending: str | Spending,
) -> tuple[np.ndarray, float]:
    """:func:`futility_bounds` and, from the same sub-densities, the power with them (what
    :func:`power` computes with these bounds, bit for bit: the same looks, stepped once)."""
    t = _fractions(fractions)
    c = np.asarray(efficacy, dtype=float)
    spend = SPENDING[spending] if isinstance(spending, str) else spending
    inc = np.diff(np.asarray(spend(t, beta), dtype=float), prepend=0.0)
    a = np.empty(t.size)
    a[-1] = c[-1]
    up = np.zeros(t.size)
    up[0] = ndtr(drift * math.sqrt(t[0]) - c[0])
    if t.size == 1:
        return a, float(up.sum())
    a[0] = min(drift * math.sqrt(t[0]) + ndtri(inc[0]), c[0])
    look = _first(t[0], a[0], c[0], drift)
    for k in range(1, t.size - 1):
        up[k] = look.above(t[k], c[k], drift)
        target = math.log(inc[k])
        if look.below(t[k], c[k], drift) <= inc[k]:
            a[k] = c[k]
        else:

            def f(x: float, k: int = k, look: _Look = look, target: float = target) -> float:
                return math.log(max(look.below(t[k], x, drift), 1e-300)) - target

            lo = drift * math.sqrt(t[k]) + ndtri(inc[k]) - 0.5
            a[k] = brentq(f, min(lo, c[k] - 1.0), c[k], xtol=1e-10)
        look = look.step(t[k], a[k], c[k], drift)
    up[-1] = look.above(t[-1], c[-1], drift)
    return a, float(up.sum())


def power(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    drift: float,
    futility: Sequence[float] | None = None,
) -> float:
    """P(the gate crosses an efficacy bound at some look) at ``drift``, futility obeyed when
    given (non-binding bounds ignored: ``futility`` None)."""
    up, _ = crossing(fractions, efficacy, futility, drift)
    return float(up.sum())


def expected_fraction(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    futility: Sequence[float] | None,
    drift: float,
) -> float:
    """Expected share of the design's samples (forward passes) one gate uses at ``drift``: it
    stops at the first look where it crosses either bound, else runs to the last."""
    t = _fractions(fractions)
    up, down = crossing(t, efficacy, futility, drift)
    stop = up + down
    stop[-1] = max(0.0, 1.0 - stop[:-1].sum())
    return float(np.dot(t, stop))


def solve_drift(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    target: float = 0.9,
    spending: str | Spending = "obf",
    futility: bool = True,
) -> float:
    """The drift at which the design's power is ``target``: with beta-spending futility bounds
    (``futility``) the drift where beta spending lands on ``a_K = c_K`` by itself, else the
    efficacy-only power."""
    beta = 1.0 - target
    if len(efficacy) == 1:  # one look: power ndtr(drift - c), the fixed design exactly
        return float(efficacy[0]) + float(ndtri(target))

    def f(theta: float) -> float:
        if futility:  # bounds and power from one pass over the looks
            return _futility_pass(fractions, efficacy, beta, theta, spending)[1] - target
        return power(fractions, efficacy, theta) - target

    hi = float(np.max(efficacy)) + abs(float(ndtri(target))) + 2.0
    return float(brentq(f, 0.0, hi, xtol=1e-9))


@lru_cache(maxsize=1024)
def _z_design(
    t: tuple[float, ...], e: tuple[float, ...], power: float, spending: str
) -> tuple[float, np.ndarray]:
    theta = solve_drift(t, e, power, spending)
    return theta, futility_bounds(t, e, 1.0 - power, theta, spending)


@dataclass(frozen=True)
class MdrP:
    """The change a sequential gate FAILs with probability ``power`` on the design's samples.

    ``value``: that change, in the figure's unit; ``drift``: in SEs of the full design
    (``value / se_full``; inf when the SE is 0); ``efficacy``/``futility``: the gate's z bounds
    per look, its floor folded in (``e_k = max(c_k, floor / SE_k)``); ``reachable`` False with
    ``reason`` when the figure has no ``room`` for that change."""

    value: float
    drift: float
    power: float
    efficacy: np.ndarray
    futility: np.ndarray
    reachable: bool = True
    reason: str | None = None


def mdr_p(
    fractions: Sequence[float],
    efficacy: Sequence[float],
    se_full: float,
    floor: float = 0.0,
    *,
    power: float = 0.9,
    room: float = math.inf,
    spending: str | Spending = "obf",
) -> MdrP:
    """MDR_P of a gate with z bounds ``efficacy`` (no floor), paired SE ``se_full`` on all the
    design's samples (``se_full / sqrt(t_k)`` at look k) and ``floor``: a look fails when the
    change exceeds ``max(floor, c_k SE_k)``, so on the z scale ``e_k = max(c_k, floor sqrt(t_k)
    / se_full)``. MDR_P is ``drift x se_full`` at the drift where beta spending under it lands
    on ``a_K = e_K`` (power exactly P, futility obeyed; more when it is not). With SE 0 it is the
    floor (any larger change fails surely). Unreachable when ``MDR_P >= room`` (the figure can
    move at most ``room`` in its worse direction): the floor alone when ``floor >= room``."""
    t = _fractions(fractions)
    c = np.asarray(efficacy, dtype=float)
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be in (0, 1), got {power}")
    if se_full <= 0.0:
        value, theta, e, a = float(floor), math.inf, c, c.copy()
    else:
        e = np.maximum(c, floor * np.sqrt(t) / se_full)
        key = spending if isinstance(spending, str) else None
        if key is None:
            theta = solve_drift(t, e, power, spending)
            a = futility_bounds(t, e, 1.0 - power, theta, spending)
        else:  # gates whose floor does not bind share their z-scale design
            theta, a = _z_design(tuple(t), tuple(e), power, key)
            a = a.copy()
        value = theta * se_full
    if floor >= room:
        why = (
            f"P = {power:.0%} is unreachable: the floor {floor:g} exceeds the {room:.4g} the "
            "figure can still move in its worse direction"
        )
        return MdrP(value, theta, power, e, a, False, why)
    if value >= room:
        why = (
            f"P = {power:.0%} is unreachable: MDR_{power:.0%} {value:.4g} exceeds the "
            f"{room:.4g} the figure can still move in its worse direction"
        )
        return MdrP(value, theta, power, e, a, False, why)
    return MdrP(value, theta, power, e, a)


__all__ = [
    "SPENDING",
    "MdrP",
    "crossing",
    "efficacy_bounds",
    "expected_fraction",
    "futility_bounds",
    "mdr_p",
    "obrien_fleming",
    "pocock",
    "power",
    "solve_drift",
]
