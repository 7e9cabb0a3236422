"""The one table of gated figures: every figure a gate, the report or the summary shows.

A :class:`FigureSpec` says, once, what a figure is called (its name is also the rule name and the
key in snapshots, verdicts and ``report.json``), at which level it is computed, which direction
is better, the smallest change that matters (the default floor), which key of the evidence
computes it, and which per-sample values explain a move. Everything else reads this table:
the plugin parametrises cases from it, payload builders fill it, the default rules come from it,
and the report labels with it.

Levels: ``cell`` (one corruption x severity), ``family`` (a corruption family's cells,
docs/spec.md §1), ``model`` (the selected grid) and ``vsi`` (the VSI set, docs/spec.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["cell", "family", "model", "vsi"]
Direction = Literal["higher", "lower"]

LEVELS: tuple[Level, ...] = ("cell", "family", "model", "vsi")


@dataclass(frozen=True)
class FigureSpec:
    """One figure at one level.

    ``key``: the replicate key of the evidence that computes it (``GridMetrics.bootstrap`` keys
    for Bench-C levels, :class:`benchc.gates.evidence.VSIEvidence` keys for VSI).
    ``floor``: default absolute floor, in the figure's unit (Mixed-cell rate: percentage points).
    ``gated``: False for figures that are measured and reported but never fail a build.
    ``bounds``: the figure's range, to tell when a gate cannot fail (its detectable regression
    exceeds the room left in the worse direction).
    ``per_sample``: the per-sample values named in a failure ("samples that moved most").
    """

    name: str
    level: Level
    direction: Direction
    floor: float
    label: str
    key: str
    bounds: tuple[float, float]
    per_sample: str | None
    gated: bool = True

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.direction == "higher" else -1

    def room(self, value: float) -> float:
        """How far the figure can still move in its worse direction from ``value``."""
        lo, hi = self.bounds
        return value - lo if self.direction == "higher" else hi - value


def _bench(level: Level, floors: dict[str, float], gated: tuple[str, ...]) -> list[FigureSpec]:
    """Bench-C figures of one level; all are model-level figures of the level's sub-grid."""
    table = {
        # name: (label, key, bounds, per-sample values, direction)
        "ras": ("RAS", "ras", (-2.0, 1.0), "ras", "higher"),
        "r_c": ("R_c (clean-correct RAS)", "r_c", (-2.0, 1.0), "ras_clean_correct", "higher"),
        "r_w": ("R_w (clean-wrong RAS)", "r_w", (-2.0, 1.0), "ras_clean_wrong", "higher"),
        "accuracy": ("corrupted accuracy", "acc_corrupt", (0.0, 1.0), "correct", "higher"),
        "relative_robustness": (
            "relative robustness", "rel_robustness", (0.0, float("inf")), "correct", "higher",
        ),
        "consistency": ("consistency", "consistency", (0.0, 1.0), "consistent", "higher"),
        "mixed_cell_rate": ("Mixed-cell rate (%)", "mixed_cell_rate", (0.0, 100.0), None, "lower"),
    }  # fmt: skip
    out = []
    for name, floor in floors.items():
        label, key, bounds, per_sample, direction = table[name]
        out.append(
            FigureSpec(name, level, direction, floor, label, key, bounds, per_sample, name in gated)  # type: ignore[arg-type]
        )
    return out


#: Floors are what a reviewer would call a real regression; measured benign changes (bf16,
#: weight noise, batch size) stay well inside them (README, gate power).
#: ``consistency`` falls under *any* change, benign included (near-tied predictions flip), so
#: it is reported at every level but gated at the model level only, with a 5-point floor.
#: Cell-level R_w rests on the few clean-wrong samples of one cell: family and model R_w gate it.
FIGURES: tuple[FigureSpec, ...] = (
    *_bench(
        "cell",
        {
            "ras": 0.02, "r_c": 0.03, "r_w": 0.05, "accuracy": 0.03,
            "relative_robustness": 0.05, "consistency": 0.05,
        },
        gated=("ras", "r_c", "accuracy", "relative_robustness"),
    ),
    *_bench(
        "family",
        {"ras": 0.01, "r_c": 0.015, "r_w": 0.03, "accuracy": 0.02, "consistency": 0.05},
        gated=("ras", "r_c", "r_w", "accuracy"),
    ),
    *_bench(
        "model",
        {
            "ras": 0.01, "r_c": 0.015, "r_w": 0.03, "mixed_cell_rate": 5.0, "accuracy": 0.01,
            "consistency": 0.05,
        },
        gated=("ras", "r_c", "r_w", "mixed_cell_rate", "accuracy", "consistency"),
    ),
    FigureSpec(
        "insensitive_fraction", "vsi", "lower", 0.03, "insensitive fraction (VSI < 0.05)",
        "insensitive_fraction", (0.0, 1.0), "insensitive",
    ),
    FigureSpec(
        "gap", "vsi", "lower", 0.05, "encoder-LLM gap", "gap", (-1.0, 1.0), "gap_terms",
    ),
)  # fmt: skip


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
