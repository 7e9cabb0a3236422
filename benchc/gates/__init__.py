"""Gates: the table of gated figures, per-sample evidence, the paired check, the false-alarm
budget, snapshot payloads with their sidecars, and the syrupy extension.

``check(baseline, current, z_for=...)`` is the one decision; everything else feeds it or reads
its :class:`Verdict`.
"""

from benchc.gates.budget import DEFAULT_BUDGET, ErrorBudget
from benchc.gates.check import Outcome, Verdict, check, describe
from benchc.gates.evidence import Evidence, EvidenceError, GridEvidence, VSIEvidence
from benchc.gates.figures import FIGURES, FigureSpec, figure, figures
from benchc.gates.payload import Figure, Payload
from benchc.gates.rules import (
    GateRule,
    RuleError,
    default_rules,
    merge_rules,
    parse_rule,
    parse_rules,
)

__all__ = [
    "DEFAULT_BUDGET",
    "FIGURES",
    "ErrorBudget",
    "Evidence",
    "EvidenceError",
    "Figure",
    "FigureSpec",
    "GateRule",
    "GridEvidence",
    "Outcome",
    "Payload",
    "RuleError",
    "VSIEvidence",
    "Verdict",
    "check",
    "default_rules",
    "describe",
    "figure",
    "figures",
    "merge_rules",
    "parse_rule",
    "parse_rules",
]
