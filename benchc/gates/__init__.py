"""Gates: rule strings, snapshot payloads, one-sided comparison and the syrupy extension."""

from benchc.gates.payload import Figure, Outcome, Payload, compare, describe, evaluate, report
from benchc.gates.rules import (
    DEFAULT_CELL_RULES,
    DEFAULT_MODEL_RULES,
    GateRule,
    RuleError,
    parse_rule,
    parse_rules,
)

__all__ = [
    "DEFAULT_CELL_RULES",
    "DEFAULT_MODEL_RULES",
    "Figure",
    "GateRule",
    "Outcome",
    "Payload",
    "RuleError",
    "compare",
    "describe",
    "evaluate",
    "parse_rule",
    "parse_rules",
    "report",
]
