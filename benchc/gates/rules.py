"""Gate rules parsed from ``figure:direction:floor=X[:z=Y]`` strings (docs/spec.md §6).

The same string form lives in the snapshot JSON, as pytest-benchmark's
``--benchmark-compare-fail=min:5%`` does: a reviewer reads and edits a rule in place.
A gate fails only when the figure moves in its worse direction by more than
``max(floor, z x SE of the paired difference)``; ``z`` comes from the run's false-alarm budget
(:mod:`benchc.gates.budget`) unless the rule fixes it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from benchc.gates.figures import Direction, Level, figures


class RuleError(ValueError):
    """A gate rule string that cannot be parsed."""


@dataclass(frozen=True)
class GateRule:
    """``figure`` is better in ``direction``; ``floor`` (and an optional fixed ``z``) set the
    slack."""

    figure: str
    direction: Direction
    floor: float
    z: float | None = None
    #: Switched off by hand (``:off``): reported, never failed; re-recording keeps it off.
    off: bool = False

    def __post_init__(self) -> None:
        if not self.figure or ":" in self.figure:
            raise RuleError(f"gate rule figure name {self.figure!r} is empty or contains ':'")
        if self.direction not in ("higher", "lower"):
            raise RuleError(f"gate rule {self.figure}: direction must be 'higher' or 'lower'")
        for name, value in (("floor", self.floor), ("z", self.z)):
            if value is not None and (not math.isfinite(value) or value < 0):
                raise RuleError(f"gate rule {self.figure}: {name} must be finite and >= 0")

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.direction == "higher" else -1

    def __str__(self) -> str:
        z = "" if self.z is None else f":z={self.z:g}"
        off = ":off" if self.off else ""
        return f"{self.figure}:{self.direction}:floor={self.floor:g}{z}{off}"


def _finite(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


def parse_rule(text: str) -> GateRule:
    """Parse ``"ras:higher:floor=0.02:z=3"``; ``floor``, ``z`` and ``off`` (the gate is
    switched off) may come in any order."""
    parts = [p.strip() for p in str(text).split(":")]
    if len(parts) < 2:
        raise RuleError(
            f"gate rule {text!r}: expected 'figure:higher|lower[:floor=X][:z=Y]', "
            "e.g. 'ras:higher:floor=0.02:z=3'"
        )
    figure, direction, *options = parts
    values: dict[str, float | None] = {"floor": 0.0, "z": None}
    off = False
    for option in options:
        if option == "off":
            off = True
            continue
        name, sep, value = option.partition("=")
        if not sep or name not in values:
            raise RuleError(
                f"gate rule {text!r}: unknown part {option!r} (use floor=X, z=Y or off)"
            )
        try:
            values[name] = float(value)
        except ValueError:
            raise RuleError(f"gate rule {text!r}: {name}={value!r} is not a number") from None
    if direction not in ("higher", "lower"):
        raise RuleError(f"gate rule {text!r}: direction {direction!r} is not 'higher' or 'lower'")
    floor = float(values["floor"] or 0.0)
    return GateRule(figure, direction, floor, values["z"], off)  # type: ignore[arg-type]


def parse_rules(texts: list[str] | tuple[str, ...]) -> dict[str, GateRule]:
    """Parse several rules, refusing two rules for one figure."""
    rules: dict[str, GateRule] = {}
    for text in texts:
        rule = parse_rule(text)
        if rule.figure in rules:
            raise RuleError(f"two gate rules for figure {rule.figure!r}")
        rules[rule.figure] = rule
    return rules


def default_rules(level: Level) -> tuple[GateRule, ...]:
    """The rules of every gated figure of ``level``, from :data:`benchc.gates.figures.FIGURES`."""
    return tuple(GateRule(f.name, f.direction, f.floor) for f in figures(level, gated_only=True))


def merge_rules(recorded: Sequence[GateRule], level: Level) -> tuple[GateRule, ...]:
    """Rules for a re-recorded snapshot: every recorded rule as it stands (hand edits survive),
    then the level's default rules for figures that have none yet (new defaults arrive)."""
    have = {r.figure for r in recorded}
    return (*recorded, *(r for r in default_rules(level) if r.figure not in have))


def check_rules(rules: Sequence[GateRule], level: Level, *, where: str) -> None:
    """Refuse rules for figures the level does not have, or against a figure's direction."""
    known = {f.name: f for f in figures(level)}
    for r in rules:
        f = known.get(r.figure)
        if f is None:
            raise RuleError(
                f"{where}: rule {str(r)!r} names no {level}-level figure; known: {sorted(known)}"
            )
        if f.direction != r.direction:
            raise RuleError(f"{where}: rule {str(r)!r}: {r.figure} is better {f.direction}")
