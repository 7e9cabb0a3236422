"""Gate rules parsed from ``figure:direction:floor=X:z=Y`` strings (SPEC section 6).

The same string form lives in the snapshot JSON and on the command line, as pytest-benchmark's
``--benchmark-compare-fail=min:5%`` does: a reviewer reads and edits a rule in place.
A gate fails only when the figure moves in its worse direction by more than
``max(floor, z x combined standard error)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

Direction = Literal["higher", "lower"]


class RuleError(ValueError):
    """A gate rule string that cannot be parsed."""


@dataclass(frozen=True)
class GateRule:
    """``figure`` is better in ``direction``; ``floor`` and ``z`` set the slack."""

    figure: str
    direction: Direction
    floor: float
    z: float

    def __post_init__(self) -> None:
        if not self.figure or ":" in self.figure:
            raise RuleError(f"gate rule figure name {self.figure!r} is empty or contains ':'")
        if self.direction not in ("higher", "lower"):
            raise RuleError(f"gate rule {self.figure}: direction must be 'higher' or 'lower'")
        for name, value in (("floor", self.floor), ("z", self.z)):
            if not math.isfinite(value) or value < 0:
                raise RuleError(f"gate rule {self.figure}: {name} must be finite and >= 0")

    @property
    def sign(self) -> int:
        """+1 when higher is better, -1 when lower is better."""
        return 1 if self.direction == "higher" else -1

    def tolerance(self, se_baseline: float, se_current: float) -> float:
        """``max(floor, z x sqrt(se_b^2 + se_c^2))``; an unknown SE counts as 0."""
        se = math.hypot(_finite(se_baseline), _finite(se_current))
        return max(self.floor, self.z * se)

    def __str__(self) -> str:
        return f"{self.figure}:{self.direction}:floor={self.floor:g}:z={self.z:g}"


def _finite(x: float | None) -> float:
    return float(x) if x is not None and math.isfinite(x) else 0.0


def parse_rule(text: str) -> GateRule:
    """Parse ``"ras:higher:floor=0.02:z=3"``; ``floor`` and ``z`` may come in any order."""
    parts = [p.strip() for p in str(text).split(":")]
    if len(parts) < 2:
        raise RuleError(
            f"gate rule {text!r}: expected 'figure:higher|lower[:floor=X][:z=Y]', "
            "e.g. 'ras:higher:floor=0.02:z=3'"
        )
    figure, direction, *options = parts
    values = {"floor": 0.0, "z": 0.0}
    for option in options:
        name, sep, value = option.partition("=")
        if not sep or name not in values:
            raise RuleError(f"gate rule {text!r}: unknown part {option!r} (use floor=X or z=Y)")
        try:
            values[name] = float(value)
        except ValueError:
            raise RuleError(f"gate rule {text!r}: {name}={value!r} is not a number") from None
    if direction not in ("higher", "lower"):
        raise RuleError(f"gate rule {text!r}: direction {direction!r} is not 'higher' or 'lower'")
    return GateRule(figure, direction, values["floor"], values["z"])  # type: ignore[arg-type]


def parse_rules(texts: list[str] | tuple[str, ...]) -> dict[str, GateRule]:
    """Parse several rules, refusing two rules for one figure."""
    rules: dict[str, GateRule] = {}
    for text in texts:
        rule = parse_rule(text)
        if rule.figure in rules:
            raise RuleError(f"two gate rules for figure {rule.figure!r}")
        rules[rule.figure] = rule
    return rules


#: SPEC section 6 directions. Floors are in the figure's own unit (Mixed-cell rate is a percentage).
#: R_w is a RAS too, so higher is better.
DEFAULT_CELL_RULES: tuple[str, ...] = (
    "ras:higher:floor=0.02:z=3",
    "r_c:higher:floor=0.03:z=3",
    "accuracy:higher:floor=0.03:z=3",
    "consistency:higher:floor=0.03:z=3",
    "relative_robustness:higher:floor=0.05:z=3",
)
DEFAULT_MODEL_RULES: tuple[str, ...] = (
    "ras:higher:floor=0.01:z=3",
    "r_c:higher:floor=0.015:z=3",
    "r_w:higher:floor=0.03:z=3",
    "mixed_cell_rate:lower:floor=5:z=3",
    "insensitive_fraction:lower:floor=0.03:z=3",
    "gap:lower:floor=0.05:z=3",
)
