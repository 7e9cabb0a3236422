"""The verdict table: every state a gate run can end in, and its exit code under each policy.

One table (docs/spec.md §6): the suite's pytest exit status, ``benchc report``'s exit code,
docs/reference/exit-codes.md (generated from :data:`TABLE`), the terminal, the page,
``report.json`` and JUnit all read a state's code and wording here. A fault outside the model
(bad input, a server that fails for good) is never a regression's code, and a run that did not
finish never says PASS.

Policies: ``--strict-gates`` and ``--inconclusive=warn|fail``. Only UNRESOLVED and INCONCLUSIVE
depend on them: ``fail`` (the default under ``--strict-gates``) exits with
:data:`EXIT_INCONCLUSIVE`, ``warn`` (the default otherwise) exits 0 and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal[
    "pass", "fail", "unresolved", "inconclusive", "interrupted", "crashed", "infra", "usage",
    "recorded",
]  # fmt: skip
Mode = Literal["warn", "fail"]

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_INTERRUPTED = 2
EXIT_USAGE = 4
EXIT_INCONCLUSIVE = 6
EXIT_CRASHED = 7
EXIT_INFRA = 8

#: ``--inconclusive`` values.
MODES: tuple[Mode, ...] = ("warn", "fail")


@dataclass(frozen=True)
class Policy:
    """How a run gates: ``--strict-gates`` and ``--inconclusive`` (None: ``fail`` under
    ``--strict-gates``, else ``warn``)."""

    strict: bool = False
    inconclusive: Mode | None = None

    @property
    def mode(self) -> Mode:
        if self.inconclusive is not None:
            return self.inconclusive
        return "fail" if self.strict else "warn"

    @property
    def flags(self) -> tuple[str, ...]:
        """The command-line flags that give this policy (a printed command keeps them)."""
        out: tuple[str, ...] = ("--strict-gates",) if self.strict else ()
        if self.inconclusive is not None:
            out += (f"--inconclusive={self.inconclusive}",)
        return out


#: The policy of a run that gives neither option.
DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Row:
    """One state: its word on every output, the exit code under ``warn`` and under ``fail``,
    and what it means."""

    state: State
    word: str
    warn: int
    fail: int
    meaning: str

    def exit_code(self, policy: Policy) -> int:
        return self.fail if policy.mode == "fail" else self.warn


TABLE: tuple[Row, ...] = (
    Row("pass", "PASS", EXIT_OK, EXIT_OK,
        "every gate was checked, none failed, none is unresolved, and each could have failed"),
    Row("recorded", "RECORDED", EXIT_OK, EXIT_OK,
        "`--snapshot-update` recorded every selected case of the baseline"),
    Row("fail", "FAIL", EXIT_FAIL, EXIT_FAIL,
        "a gate failed: the candidate regressed (the only state with this code)"),
    Row("unresolved", "UNRESOLVED", EXIT_OK, EXIT_INCONCLUSIVE,
        "no gate failed, but a figure moved the worse way by more than its minimal detectable "
        "regression and this run cannot tell (more samples resolve it)"),
    Row("inconclusive", "INCONCLUSIVE", EXIT_OK, EXIT_INCONCLUSIVE,
        "no gate failed, but the gates could not have caught a regression (gates that cannot "
        "fail, gates not checked, a model not answering, a large ungated change)"),
    Row("interrupted", "INTERRUPTED", EXIT_INTERRUPTED, EXIT_INTERRUPTED,
        "the run stopped before every case ran (Ctrl-C; `-x` after a case that raised; a FAIL "
        "found before `-x` stopped stays FAIL): no verdict; the resume command reuses what was "
        "computed"),
    Row("crashed", "CRASHED", EXIT_CRASHED, EXIT_CRASHED,
        "a gated case raised before its gates were checked (an error in the model's code or "
        "benchc's): no verdict on the cases that did not raise"),
    Row("infra", "INFRASTRUCTURE ERROR", EXIT_INFRA, EXIT_INFRA,
        "the run could not finish for a reason outside the model (a server that fails for good, "
        "a store that cannot be read or written): never a regression; resume when it is fixed"),
    Row("usage", "USAGE ERROR", EXIT_USAGE, EXIT_USAGE,
        "the run could not start: a bad option, model, dataset or sample, no such baseline, a "
        "setting that differs from the baseline's, a checkpoint that cannot take its input"),
)  # fmt: skip
_BY_STATE = {r.state: r for r in TABLE}
#: States that are a verdict on the candidate (the others say why there is none).
VERDICTS: tuple[State, ...] = ("pass", "fail", "unresolved", "inconclusive")


def row(state: State) -> Row:
    return _BY_STATE[state]


def exit_code(state: State, policy: Policy) -> int:
    """The exit code of ``state`` under ``policy``: the one rule of every benchc command."""
    return row(state).exit_code(policy)


def word(state: State) -> str:
    return row(state).word


__all__ = [
    "DEFAULT_POLICY", "EXIT_CRASHED", "EXIT_FAIL", "EXIT_INCONCLUSIVE", "EXIT_INFRA",
    "EXIT_INTERRUPTED", "EXIT_OK", "EXIT_USAGE", "MODES", "TABLE", "VERDICTS", "Mode", "Policy",
    "Row", "State",
    "exit_code", "row", "word",
]  # fmt: skip
