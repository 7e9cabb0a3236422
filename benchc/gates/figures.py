"""The one table of gated figures: every figure a gate, the report or the summary shows.

A :class:`FigureSpec` says which figure (its record in :mod:`benchc.metrics.figures`: name,
label, better direction, bounds, per-sample values; the name is also the rule name and the key
in snapshots, verdicts and ``report.json``) is gated at which level, with the smallest change
that matters (the default floor) and whether it fails a build. Everything else reads this table:
the plugin parametrises cases from it, payload builders fill it, the default rules come from it,
and the report labels with it.

Levels: ``cell`` (one corruption x severity), ``family`` (a corruption family's cells,
docs/spec.md §1), ``model`` (the selected grid), ``vsi`` (the VSI set, docs/spec.md §5) and
``sample`` (one sample in one cell, the ``--per-sample`` drill-down).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from benchc.metrics.figures import Direction, FigureDef, definition

Level = Literal["cell", "family", "model", "vsi", "sample"]

LEVELS: tuple[Level, ...] = ("cell", "family", "model", "vsi", "sample")


@dataclass(frozen=True)
class FigureSpec:
    """One gate of one figure at one level: the figure's record
    (:class:`benchc.metrics.figures.FigureDef`: name, label, direction, bounds, per-sample
    values) plus what gating adds.

    ``floor``: default absolute floor, in the figure's unit (Mixed-cell rate: percentage points).
    ``gated``: False for figures that are measured and reported but never fail a build.
    """

    name: str
    level: Level
    floor: float
    gated: bool = True
    #: The value is a share of whole samples at this level (each counted sample contributes
    #: 0 or 1): a regression moves whole samples, whose own binomial spread widens the paired
    #: SE, so the minimal detectable regression accounts for it (:mod:`benchc.gates.check`).
    share: bool = False

    @property
    def definition(self) -> FigureDef:
        return definition(self.name)

    @property
    def key(self) -> str:
        """The evidence key that computes it (the figure's name)."""
        return self.name

    @property
    def direction(self) -> Direction:
        return self.definition.direction

    @property
    def label(self) -> str:
        return self.definition.label

    @property
    def bounds(self) -> tuple[float, float]:
        """The figure's range, to tell when a gate cannot fail (its detectable regression
        exceeds the room left in the worse direction)."""
        return self.definition.bounds

    @property
    def per_sample(self) -> str | None:
        """The per-sample values named in a failure ("samples that moved most")."""
        return self.definition.explains

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.direction == "higher" else -1

    def room(self, value: float) -> float:
        """How far the figure can still move in its worse direction from ``value``."""
        lo, hi = self.bounds
        return value - lo if self.direction == "higher" else hi - value


def gate(
    level: Level, floors: dict[str, float], gated: tuple[str, ...], shares: tuple[str, ...] = ()
) -> list[FigureSpec]:
    """The gates of one level: each figure with its default floor, ``gated`` failing builds,
    ``shares`` the shares of whole samples (:attr:`FigureSpec.share`)."""
    return [
        FigureSpec(name, level, floor, name in gated, name in shares)
        for name, floor in floors.items()
    ]


#: Floors are what a reviewer would call a real regression; measured benign changes (bf16,
#: weight noise, batch size) stay well inside them (docs/measurements.md, gate power).
#: ``consistency`` falls under *any* change, benign included (near-tied predictions flip), so
#: it is reported at every level but gated at the model level only, with a 5-point floor.
#: Cell-level R_w rests on the few clean-wrong samples of one cell: family and model R_w gate it.
#: ``p_correct`` (the probability of the correct option) is the continuous, paired counterpart
#: of accuracy: a checkpoint that churns (gets other samples right) widens every 0/1 statistic,
#: not this one. ``negative_flips`` (right on the baseline, wrong on the candidate) is gated
#: on its own because churn hides it inside a small net accuracy change. Their floors sit above
#: what measured benign variants reach (docs/measurements.md, benign calibration); the clean
#: counterparts gate the clean condition once, at the model level.
#: Option order (docs/spec.md §4): the model level gates each figure on the clean image and
#: under corruption, the family level its corrupted ones. Floors from the benign variants
#: (docs/measurements.md, option-order floors: one variant held out).
ORDER_FLOORS: dict[str, dict[str, float]] = {
    "model": {
        "circular_accuracy": 0.02, "circular_accuracy_clean": 0.03,
        "position_preference": 0.02, "position_preference_clean": 0.03,
        "order_interaction": 0.03,
    },
    "family": {"circular_accuracy": 0.03, "position_preference": 0.03, "order_interaction": 0.05},
}  # fmt: skip
#: A list, so a figure registered elsewhere can be gated by appending its specs.
FIGURES: list[FigureSpec] = [
    *gate(
        "cell",
        {
            "ras": 0.02, "r_c": 0.03, "r_w": 0.05, "accuracy": 0.03,
            "relative_robustness": 0.05, "consistency": 0.05, "p_correct": 0.02,
            "negative_flips": 0.08,
        },
        gated=("ras", "r_c", "accuracy", "relative_robustness", "p_correct", "negative_flips"),
        # one cell's accuracy, consistency, relative robustness and negative flips are shares
        # of its samples: a regression there moves whole samples (their spread enters the MDR)
        shares=("accuracy", "relative_robustness", "consistency", "negative_flips"),
    ),
    *gate(
        "family",
        {
            "ras": 0.01, "r_c": 0.015, "r_w": 0.03, "accuracy": 0.02, "consistency": 0.05,
            "p_correct": 0.01, "negative_flips": 0.04, **ORDER_FLOORS["family"],
        },
        gated=("ras", "r_c", "r_w", "accuracy", "p_correct", "negative_flips",
               *ORDER_FLOORS["family"]),
    ),
    *gate(
        "model",
        {
            "ras": 0.01, "r_c": 0.015, "r_w": 0.03, "mixed_cell_rate": 5.0, "accuracy": 0.01,
            "consistency": 0.05, "p_correct": 0.005, "p_correct_clean": 0.01,
            "negative_flips": 0.03, "negative_flips_clean": 0.05, **ORDER_FLOORS["model"],
        },
        gated=(
            "ras", "r_c", "r_w", "mixed_cell_rate", "accuracy", "consistency", "p_correct",
            "p_correct_clean", "negative_flips", "negative_flips_clean", *ORDER_FLOORS["model"],
        ),
        shares=("negative_flips_clean", "circular_accuracy_clean"),
    ),
    # both VSI figures move by whole samples: a sample turns insensitive, or its gap term
    # (probe correct - argmax changed, in {-1, 0, 1}) steps by 1
    *gate(
        "vsi", {"insensitive_fraction": 0.03, "gap": 0.05}, gated=("insensitive_fraction", "gap"),
        shares=("insensitive_fraction", "gap"),
    ),
    # ``--per-sample``: one pair's RAS, its tolerance from its own benign spread
    # (:mod:`benchc.gates.samples`); the floor is the smallest per-sample drop worth naming
    *gate("sample", {"ras": 0.1}, gated=("ras",)),
]  # fmt: skip


def figures(level: Level, *, gated_only: bool = False) -> tuple[FigureSpec, ...]:
    """The figures of one level, in table order."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; one of {LEVELS}")
    return tuple(f for f in FIGURES if f.level == level and (f.gated or not gated_only))


def figure(level: Level, name: str) -> FigureSpec:
    """One figure's spec; a clear error for a name the level does not have."""
    for f in figures(level):
        if f.name == name:
            return f
    known = [f.name for f in figures(level)]
    raise KeyError(f"no {level}-level figure {name!r}; known: {known}")


def reads_rotations(level: Level, names: Sequence[str] | None = None) -> bool:
    """Whether a case of ``level`` gating ``names`` (default: all its figures) reads option
    rotations: only such a case's evidence carries them (docs/spec.md §4, option order)."""
    return any(f.definition.rotations for f in figures(level) if names is None or f.name in names)
