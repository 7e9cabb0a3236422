"""Family-wise error control: one false-alarm budget per run, split into each gate's z.

About 400 gates run in a full build. Testing each at z = 3 (a one-sided 0.13 % false-alarm
rate) would make a build with no real change fail about two times in five from chance alone.
The run declares a budget instead (``--false-alarm-budget``, default 1 %): the probability that
*any* gate fails when nothing changed.

Rule: weighted Bonferroni. The budget is split across levels by fixed weights (model-level
gates get the largest share per gate, because there are few and they are what a release is
judged on), then evenly across the gates of each level that run; each gate's one-sided
alpha becomes its z. Bonferroni is valid under any dependence between gates (cells of one
model are strongly correlated), needs no ordering of p-values across gates (Holm would: gates
run as separate pytest cases, possibly in different xdist workers), and a subset run (``-k``,
``--corruptions``) spends the same budget on fewer gates, so each gets more. A rule in a
snapshot may still fix its own ``z``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from scipy.special import ndtri

from benchc.gates.figures import LEVELS, Level, figures

if TYPE_CHECKING:
    from benchc.gates.payload import Payload

DEFAULT_BUDGET = 0.01
#: Share of the budget per level (renormalised over the levels that run).
#: ``sample`` (the ``--per-sample`` cases) only runs when asked for; without it the shares
#: of the other levels are exactly those of a default run.
LEVEL_WEIGHTS: Mapping[Level, float] = {
    "model": 0.4, "vsi": 0.1, "family": 0.25, "cell": 0.25, "sample": 0.1,
}  # fmt: skip


#: One case: its level and the figures it gates (None: every gated figure of the level).
Case = tuple[Level, Sequence[str] | None]


def count_gates(cases: Iterable[Case]) -> dict[Level, int]:
    """How many gates the cases run, per level (the budget's denominators). The one count, for
    the pytest selection (the plugin) and for payloads rebuilt offline alike."""
    counts: Counter = Counter()
    for level, names in cases:
        counts[level] += len(figures(level, gated_only=True) if names is None else names)
    return dict(counts)


def payload_cases(payloads: Iterable[Payload]) -> list[Case]:
    """The cases of these payloads as the live suite counts them: a cell's or family's case
    gates every gated figure of its level, a model or VSI case its one figure."""
    return [
        (p.level, None if p.level in ("cell", "family") else tuple(p.figures)) for p in payloads
    ]


def look_fractions(n: int, total: int, looks: int, look: int) -> tuple[float, ...]:
    """The information fraction of each look of a sequential gate at look ``look`` on ``n`` of
    the baseline's ``total`` samples: the looks' sizes are fixed before look 1 (``ceil(j total /
    looks)``), the current look's is the samples it actually used; where those would not grow,
    the earlier looks are taken as even steps up to it. The last look spends what is left
    whatever it uses: its fraction is 1."""
    total = max(1, total)
    planned = [math.ceil(j * total / looks) / total for j in range(1, looks + 1)]
    current = 1.0 if look == looks else min(1.0, max(1, n) / total)
    if current >= 1.0:  # this look sees every sample: the design ends here, spending the rest
        early = planned[: look - 1]
        if early and early[-1] >= 1.0:
            early = [j / look for j in range(1, look)]
        return (*early, 1.0)
    out = [*planned[: look - 1], current, *planned[look:]]
    if any(b <= a for a, b in pairwise(out[:look])):
        out[:look] = [current * j / look for j in range(1, look + 1)]
    for j in range(look, looks):  # later looks never before this one
        out[j] = max(out[j], out[j - 1] + 1e-9 * (j + 1))
    return tuple(out)


@dataclass(frozen=True)
class ErrorBudget:
    """``alpha``: the run's false-alarm budget; ``gates``: how many gates of each level run;
    ``looks``: the looks of a sequential gate (``--looks``), this run being ``look``, at
    information ``fractions`` (None: even). Each gate's share of the budget is spent over the
    looks by Lan-DeMets alpha spending (``spending``: O'Brien-Fleming type by default, Pocock),
    exactly (:mod:`benchc.gates.spending`): a gate's probability of ever failing under no change
    is its share, whatever stops the run early, so the union over gates and looks holds the
    budget. One look is today's fixed gate, bit for bit."""

    alpha: float = DEFAULT_BUDGET
    gates: Mapping[Level, int] = field(default_factory=dict)
    looks: int = 1
    look: int = 1
    fractions: tuple[float, ...] | None = None
    spending: str = "obf"

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"false-alarm budget must be in (0, 1), got {self.alpha}")
        for level, n in self.gates.items():
            if level not in LEVELS or n < 0:
                raise ValueError(f"bad gate count {level!r}: {n}")
        if self.looks < 1:
            raise ValueError(f"looks must be >= 1, got {self.looks}")
        if not 1 <= self.look <= self.looks:
            raise ValueError(f"look must be in 1..{self.looks}, got {self.look}")

    @classmethod
    def for_cases(cls, alpha: float, cases: Iterable[Case]) -> ErrorBudget:
        """The budget over the gates of these cases (:func:`count_gates`)."""
        return cls(alpha, count_gates(cases))

    @classmethod
    def for_payloads(cls, alpha: float, payloads: Iterable[Payload]) -> ErrorBudget:
        """The budget over the gates of these cases' payloads (offline: ``benchc report``):
        each payload's rules are its gates."""
        return cls.for_cases(alpha, ((p.level, tuple(r.figure for r in p.rules)) for p in payloads))

    def alpha_for(self, level: Level) -> float:
        """One gate's one-sided false-alarm rate at ``level``."""
        present = {lv: w for lv, w in LEVEL_WEIGHTS.items() if self.gates.get(lv, 0) > 0}
        if level not in present:  # a level nobody counted (a direct call): spend it all there
            present, count = {level: 1.0}, max(1, self.gates.get(level, 0))
        else:
            count = self.gates[level]
        share = present[level] / sum(present.values())
        return self.alpha * share / count

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON (an xdist worker hands its budget to the controller)."""
        fractions = list(self.fractions) if self.fractions is not None else None
        return {"alpha": self.alpha, "gates": dict(self.gates), "looks": self.looks,
                "look": self.look, "fractions": fractions, "spending": self.spending}  # fmt: skip

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ErrorBudget:
        fractions = tuple(d["fractions"]) if d.get("fractions") is not None else None
        return cls(float(d["alpha"]), dict(d["gates"]), int(d["looks"]), int(d["look"]),
                   fractions, str(d.get("spending", "obf")))  # fmt: skip

    @property
    def information(self) -> tuple[float, ...]:
        """Each look's information fraction (even steps unless given)."""
        if self.fractions is not None:
            return tuple(self.fractions)
        return tuple(k / self.looks for k in range(1, self.looks + 1))

    def z(self, level: Level) -> float:
        """The gate's bound at this look: one look, the one-sided normal quantile of
        :meth:`alpha_for` (``norm.isf``, bit for bit, without importing ``scipy.stats``: 0.7 s of
        every run's start); several, the look's group-sequential boundary."""
        if self.looks == 1:
            return float(-ndtri(self.alpha_for(level)))
        from benchc.gates.design import _efficacy

        bounds = _efficacy(self.information, self.alpha_for(level), self.spending)
        return float(bounds[self.look - 1])

    def describe(self) -> str:
        parts = [
            f"{lv} {self.gates[lv]} x z={self.z(lv):.2f}" for lv in LEVELS if self.gates.get(lv)
        ]
        over = (
            f", spent over {self.looks} looks by {self.spending.upper()}-type alpha spending: "
            f"look {self.look}"
            if self.looks > 1
            else ""
        )
        return f"false-alarm budget {self.alpha:g} (weighted Bonferroni{over}): " + ", ".join(parts)


def case_budget(
    alpha: float,
    payloads: Iterable[Payload],
    looks: int = 1,
    look: int = 1,
    fractions: tuple[float, ...] | None = None,
) -> ErrorBudget:
    """The budget over the gates of these cases, counted as the live suite counts its
    collected cases (so ``benchc report`` and ``benchc plan`` spend what the run spent)."""
    return ErrorBudget(alpha, count_gates(payload_cases(payloads)), looks, look, fractions)
