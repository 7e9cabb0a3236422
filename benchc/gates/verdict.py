"""A run's one verdict, with its reasons grouped by kind and its exit code from the verdict table.

Why: "no gate failed" is not "the candidate is as robust as its baseline" when the gates could
not have failed, when the run did not finish, or when a fault outside the model stopped it. One
definition, :func:`decide` (the gate records and :class:`~benchc.gates.facts.Facts`) followed by
:func:`conclude` (how the run ended), makes the :class:`Overall` that every output renders: the
terminal summary, ``report.json`` (``overall``), the page's banner, JUnit's suite properties,
the GitHub step summary, the exporters and the exit code (:mod:`benchc.gates.states`).

* ``fail``: a gate failed (the only state with a regression's exit code).
* ``unresolved``: no gate failed, but a gated figure moved the worse way by more than its
  printed minimal detectable regression while staying inside this run's own, widened tolerance.
* ``inconclusive``: no gate failed, but the gates could not have caught a regression: a
  model-level or VSI gate cannot fail on this dataset, or most checked gates cannot; no gate, or
  a model-level gate, could be checked (under ``--strict-gates``: any gate); the candidate or
  the baseline is not answering with a letter; a Table II figure moved a long way the worse way
  and no gate that can fail covers it; the candidate no longer looks at the image.
* ``pass``: every other run with at least one checked gate.
* ``crashed``, ``interrupted``, ``infra``: the run did not finish its cases (a case raised, the
  user stopped it, a fault outside the model); never PASS, each with its own exit code.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from benchc import spec
from benchc.gates.check import unresolved_text
from benchc.gates.facts import BLIND_TV, Facts
from benchc.gates.states import DEFAULT_POLICY, Policy, exit_code, word

#: "Most samples": more than this share.
MOST = 0.5
#: A large change: this share of the figure's range (0.05 of an accuracy, 5 points of a %).
LARGE_CHANGE = 0.05
#: The count (in :attr:`Overall.counts`) and reason kind of gated cases that raised.
ERROR = "error"
#: The count and reason kind of gated cases the baseline could not check (a missing, unusable or
#: incomparable snapshot, a rule that cannot be read): the usage state.
PROBLEM = "case_problem"

Record = Mapping[str, Any]
#: Gate statuses that were compared with the baseline (able to fail).
CHECKED: tuple[str, ...] = ("pass", "fail", "improved")
#: The gated figures that cover a Table II figure (a large change of it is caught by them).
COVERS: Mapping[str, tuple[str, ...]] = {
    "acc_clean": ("p_correct_clean", "negative_flips_clean"),
    "accuracy": ("accuracy", "p_correct", "negative_flips"),
    "d_acc": ("accuracy", "p_correct", "negative_flips", "p_correct_clean"),
}
#: The summary's heading of each reason kind, in the order they print.
HEADINGS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("infrastructure fault (not a regression)", ("infra",)),
    ("not finished", ("interrupted",)),
    (
        "cases the baseline cannot check (a missing or unusable snapshot, other settings)",
        (PROBLEM,),
    ),
    ("cases that raised before their gates were checked", (ERROR,)),
    ("failed gates", ("failed",)),
    ("unresolved gates (more samples resolve them)", ("unresolved",)),
    ("unchecked gates", ("unchecked", "unchecked_gate")),
    ("sequential design", ("sequential",)),
    (
        "why the gates could not have caught a regression",
        ("powerless", "not_answering", "ungated_change", "image_blind"),
    ),
)


@dataclass(frozen=True)
class Reason:
    """One cause, once: its ``kind`` (a key of :data:`HEADINGS`), text, how many gates it
    covers and the page's anchor of the one gate it names (else None)."""

    kind: str
    text: str
    gates: int = 0
    anchor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "gates": self.gates, "anchor": self.anchor}


@dataclass(frozen=True)
class Progress:
    """How much of a run finished: cases run of those selected, and the command that resumes
    it from what was stored."""

    finished: int
    selected: int
    resume: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"finished": self.finished, "selected": self.selected, "resume": self.resume}


@dataclass(frozen=True)
class Overall:
    """The run's verdict: ``state`` (:mod:`benchc.gates.states`), every reason behind it, the
    gate counts, the facts, the policy it exits under and, for an unfinished run, its
    progress."""

    state: str
    reasons: tuple[Reason, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    facts: Facts | None = None
    policy: Policy = DEFAULT_POLICY
    progress: Progress | None = None

    @property
    def exit_code(self) -> int:
        """The verdict table's code of this state under this run's policy."""
        return 0 if self.state == "none" else exit_code(self.state, self.policy)  # type: ignore[arg-type]

    @property
    def finished(self) -> bool:
        return self.state not in ("interrupted", "infra")

    @property
    def headline(self) -> str:
        return _HEADLINES.get(self.state, _none)(self)

    def lines(self) -> list[str]:
        """The headline, then the reasons under their headings (the terminal's and the step
        summary's text)."""
        out = [self.headline]
        for heading, kinds in HEADINGS:
            group = [r for r in self.reasons if r.kind in kinds]
            if group:
                out.append(f"  {heading}:")
                out.extend(f"    - {r.text}" for r in group)
        if self.exit_code and self.state in ("unresolved", "inconclusive"):
            why = "--inconclusive=fail" if self.policy.inconclusive else "--strict-gates"
            out.append(f"  exit status {self.exit_code}: under {why} a run passes on PASS only "
                       "(--inconclusive=warn keeps exit status 0 and says why)")  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        """``report.json`` ``overall``."""
        return {
            "state": self.state,
            "headline": self.headline,
            "exit_code": self.exit_code,
            "policy": {
                "strict": self.policy.strict,
                "inconclusive": self.policy.inconclusive,  # as given (None: by --strict-gates)
                "mode": self.policy.mode,
            },
            "reasons": [r.to_dict() for r in self.reasons],
            "counts": dict(self.counts),
            "facts": self.facts.to_dict() if self.facts is not None else None,
            "progress": self.progress.to_dict() if self.progress is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overall:
        reasons = tuple(
            Reason(r["kind"], r["text"], int(r.get("gates", 0)), r.get("anchor"))
            for r in d["reasons"]
        )
        pol = d.get("policy") or {}
        policy = Policy(bool(pol.get("strict")), pol.get("inconclusive"))
        prog = d.get("progress")
        progress = Progress(**prog) if isinstance(prog, dict) else None
        return cls(str(d["state"]), reasons, dict(d.get("counts") or {}), None, policy, progress)


def _fail(o: Overall) -> str:
    n_fail, n_err = o.counts.get("fail", 0), o.counts.get(ERROR, 0)
    raised = f", {n_err} gated case(s) raised before their gates were checked" if n_err else ""
    return f"FAIL: {n_fail} gate(s) failed{raised}"


def _unresolved(o: Overall) -> str:
    return (
        f"UNRESOLVED: no gate failed, but {o.counts.get('unresolved', 0)} gated figure(s) moved "
        "the worse way by more than their minimal detectable regression and this run cannot tell"
    )


#: Reason kinds that make a run INCONCLUSIVE (the others are listed, not doubts).
DOUBTS = ("powerless", "unchecked", "not_answering", "ungated_change", "image_blind")


def _inconclusive(o: Overall) -> str:
    n = sum(1 for r in o.reasons if r.kind in DOUBTS)
    return (
        f"INCONCLUSIVE: no gate failed, but {n} reason(s) the gates could not have caught a "
        "regression"
    )


def _pass(o: Overall) -> str:
    checked = sum(o.counts.get(s, 0) for s in CHECKED)
    return f"PASS: no gate failed ({checked} checked, each able to fail)"


def _crashed(o: Overall) -> str:
    n = o.counts.get(ERROR, 0)
    return (
        f"{word('crashed')}: {n} gated case(s) raised before their gates were checked; no "
        "verdict (the cases that did not raise cannot vouch for them)"
    )


def _interrupted(o: Overall) -> str:
    p = o.progress
    done = f" after {p.finished} of {p.selected} case(s)" if p is not None else ""
    return f"{word('interrupted')}: the run stopped{done}; no verdict"


def _infra(o: Overall) -> str:
    return (
        f"{word('infra')}: the run could not finish for a reason outside the model; no verdict, "
        "and not a regression"
    )


def _usage(o: Overall) -> str:
    n = o.counts.get(PROBLEM, 0)
    return (
        f"{word('usage')}: {n} gated case(s) could not be checked against the baseline (its "
        "snapshot is missing, unusable or recorded under other settings); no verdict"
    )


def _recorded(o: Overall) -> str:
    kept = o.counts.get("kept", 0)
    also = f"; {kept} case(s) kept as recorded over a larger grid" if kept else ""
    return f"{word('recorded')}: {o.counts.get('recorded', 0)} gate(s) recorded{also}"


def _none(o: Overall) -> str:
    return "no gate verdicts"


_HEADLINES = {
    "fail": _fail, "unresolved": _unresolved, "inconclusive": _inconclusive, "pass": _pass,
    "crashed": _crashed, "interrupted": _interrupted, "infra": _infra, "recorded": _recorded,
    "usage": _usage,
}  # fmt: skip


def verdict_anchor(v: Record) -> str:
    """A stable HTML id for one gate verdict (the page's row of it)."""
    raw = f"gate-{v.get('scope') or ''}-{v.get('figure') or ''}"
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in raw)


def is_powerless(record: Record) -> bool:
    """The gate cannot fail on this dataset (its MDR is at least its figure's room)."""
    return bool(record.get("powerless")) or "cannot fail" in str(record.get("reason") or "")


def powerless_gates(records: Iterable[Record]) -> list[Record]:
    """The checked gates that cannot fail on this dataset: the one count the verdict's reason
    and the summary's ``POWERLESS`` line both print."""
    return [r for r in records if r.get("status") in CHECKED and is_powerless(r)]


def counted(records: Sequence[Record]) -> str:
    """``"ras: 95 cell, 5 family; r_c: 3 cell"``."""
    by: dict[str, Counter[str]] = {}
    for r in records:
        by.setdefault(str(r.get("figure") or r.get("scope")), Counter())[str(r.get("level"))] += 1
    return "; ".join(
        f"{fig}: " + ", ".join(f"{n} {lvl}" for lvl, n in sorted(c.items()))
        for fig, c in sorted(by.items())
    )


def _fmt(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.4g}"


def group_failures(fails: Sequence[Record]) -> tuple[dict[str, list[Record]], list[Record]]:
    """Failed gates with one shared cause (a figure that became undefined: one missing figure
    fails its gate in every cell, family and the model) by that cause, and the others."""
    by_reason: dict[str, list[Record]] = {}
    plain = []
    for r in fails:
        why = str(r.get("reason") or "")
        if "became undefined" in why:
            by_reason.setdefault(why.partition(" (")[0], []).append(r)
        else:
            plain.append(r)
    return by_reason, plain


def grouped_text(why: str, group: Sequence[Record]) -> str:
    """``"r_c became undefined in 22 gate(s) (r_c: 20 cell, 2 family)"``."""
    return f"{why} in {len(group)} gate(s) ({counted(group)})"


def _failed(fails: Sequence[Record]) -> list[Reason]:
    """Failed gates grouped by cause: the same reason is one entry however many gates."""
    by_reason, plain = group_failures(fails)
    out = [Reason("failed", grouped_text(why, g), len(g)) for why, g in by_reason.items()]
    for r in plain:
        note = f"; {r['note']}" if r.get("note") else ""
        text = (
            f"{r.get('figure')} in {r.get('scope')}: {_fmt(r.get('baseline'))} -> "
            f"{_fmt(r.get('current'))} (tolerance {_fmt(r.get('tolerance'))}, MDR "
            f"{_fmt(r.get('mdr'))}){note}"
        )
        out.append(Reason("failed", text, 1, verdict_anchor(r)))
    return out


def unchecked_gates(records: Sequence[Record]) -> list[Reason]:
    """Every unchecked gate, one entry per reason (listed whatever the state; a doubt only
    where :func:`_doubts` says)."""
    by: dict[str, list[Record]] = {}
    for r in records:
        if r.get("status") == "unchecked":
            by.setdefault(str(r.get("reason")), []).append(r)
    out = []
    for reason, group in by.items():
        what = (f"{group[0].get('figure') or '?'} in {group[0].get('scope')}" if len(group) == 1
                else f"{len(group)} gates ({counted(group)})")  # fmt: skip
        out.append(Reason("unchecked_gate", f"{what}: {reason}", len(group)))
    return out


def _doubts(records: Sequence[Record], checked: Sequence[Record], strict: bool) -> list[Reason]:
    """Why the checked gates could not have caught a regression (the gates' own part)."""
    out: list[Reason] = []
    powerless = powerless_gates(checked)
    headline_gates = [r for r in powerless if r.get("level") in ("model", "vsi")]
    if headline_gates or (checked and len(powerless) * 2 > len(checked)):
        out.append(Reason(
            "powerless",
            f"{len(powerless)} of {len(checked)} checked gate(s) cannot fail on this dataset "
            f"(minimal detectable regression >= the room the figure has: {counted(powerless)}); "
            "more samples give them power",
            len(powerless),
        ))  # fmt: skip
    unchecked = [r for r in records if r.get("status") == "unchecked"]
    model = [r for r in unchecked if r.get("level") == "model"]
    if records and not checked:
        out.append(Reason("unchecked", f"no gate could be checked ({len(unchecked)} unchecked)",
                          len(unchecked)))  # fmt: skip
    elif unchecked and strict:
        text = (
            f"{len(unchecked)} gate(s) could not be checked, which --strict-gates refuses "
            f"({counted(unchecked)})"
        )
        out.append(Reason("unchecked", text, len(unchecked)))
    elif model:
        out.append(Reason("unchecked", f"{len(model)} model-level gate(s) could not be checked "
                          f"({counted(model)})", len(model)))  # fmt: skip
    return out


def decide(
    records: Iterable[Record], facts: Facts | None = None, *, policy: Policy = DEFAULT_POLICY
) -> Overall:
    """The verdict of a finished run's gate ``records`` (:meth:`benchc.gates.Outcome.to_dict`)
    and ``facts`` (:func:`benchc.gates.facts.run_facts`) under ``policy``."""
    records = [r for r in records if r.get("status") not in ("recorded", "kept")]
    counts = dict(Counter(str(r.get("status")) for r in records))
    checked = [r for r in records if r.get("status") in CHECKED]
    fails = [r for r in records if r.get("status") == "fail"]
    unresolved = [
        Reason("unresolved", unresolved_text(r), 1, verdict_anchor(r))
        for r in records
        if r.get("status") == "unresolved"
    ]
    doubts = _doubts(records, checked, policy.strict)
    if facts is not None:
        doubts.extend(_fact_reasons(facts, records))
    listed = (*unresolved, *unchecked_gates(records), *doubts)
    if fails:
        return Overall("fail", (*_failed(fails), *listed), counts, facts, policy)
    if not records:
        return Overall("none", tuple(doubts), counts, facts, policy)
    if unresolved:
        return Overall("unresolved", listed, counts, facts, policy)
    return Overall("inconclusive" if doubts else "pass", listed, counts, facts, policy)


def raised(errored: Sequence[Mapping[str, str]], what: str = "raised") -> list[str]:
    """One line per distinct error of the gated cases that raised (``{"case", "error"}`` each):
    ``"12 case(s) raised (test_cell[fog-1], ... and 9 more): ValueError: ..."``."""
    by_error: dict[str, list[str]] = {}
    for e in sorted(errored, key=lambda e: str(e.get("case"))):  # xdist: in any order
        by_error.setdefault(str(e.get("error")), []).append(str(e.get("case")))
    out = []
    for error, cases in by_error.items():
        more = f" and {len(cases) - 3} more" if len(cases) > 3 else ""
        out.append(f"{len(cases)} case(s) {what} ({', '.join(cases[:3])}{more}): {error}")
    return out


@dataclass(frozen=True)
class Ending:
    """How a run ended beyond its gate records: the gated cases that raised (``errored``) or
    that the baseline could not check (``problems``), each ``{"case", "error"}``; why it did
    not finish (``interrupted``: by the user, ``by_user``, or by pytest's ``-x``); a fault
    outside the model (``infra``); and what finished (``progress``)."""

    errored: Sequence[Mapping[str, str]] = ()
    problems: Sequence[Mapping[str, str]] = ()
    interrupted: str | None = None
    by_user: bool = True
    infra: str | None = None
    progress: Progress | None = None


#: A run that finished every case it selected.
FINISHED = Ending()


def conclude(overall: Overall, ending: Ending = FINISHED) -> Overall:
    """``overall`` (:func:`decide`) as the run ended. Precedence: a fault outside the model
    (``infra``), then an interruption by the user, then a failed gate (final: a run stopped
    early by it, ``by_user=False``, still FAILs), then an unfinished run, then cases the
    baseline could not check (the usage state), then cases that raised; a run that did not
    finish never says PASS (its page says what finished and how to resume)."""
    errored, problems, interrupted = ending.errored, ending.problems, ending.interrupted
    infra, by_user, progress = ending.infra, ending.by_user, ending.progress
    reasons = list(overall.reasons)
    counts = dict(overall.counts)
    if errored:
        reasons = [Reason(ERROR, text) for text in raised(errored)] + reasons
        counts[ERROR] = len(errored)
    if problems:
        reasons = [
            Reason(PROBLEM, text) for text in raised(problems, "could not be checked")
        ] + reasons
        counts[PROBLEM] = len(problems)
    state = overall.state
    if infra is not None:
        state, reasons = "infra", [Reason("infra", infra), *reasons]
    elif interrupted is not None:
        reasons = [Reason("interrupted", interrupted), *reasons]
        state = "fail" if state == "fail" and not by_user else "interrupted"
    elif problems and state != "fail":
        state = "usage"
    elif errored and state != "fail":
        state = "crashed"
    return replace(overall, state=state, reasons=tuple(reasons), counts=counts,
                   progress=progress or overall.progress)  # fmt: skip


def _covered(name: str, records: Sequence[Record]) -> str | None:
    """Why a large change of Table II figure ``name`` needs no reason of its own (None: no gate
    that can fail covers it)."""
    covering = {name, *COVERS.get(name, ())}
    caught = [r for r in records if r.get("figure") in covering and r.get("status") in
              ("fail", "unresolved")]  # fmt: skip
    able = [r for r in records if r.get("figure") in covering and r.get("level") == "model"
            and r.get("status") in CHECKED and not is_powerless(r)]  # fmt: skip
    return "caught" if caught or able else None


def _ungated(facts: Facts, records: Sequence[Record]) -> list[Reason]:
    gated = {str(r.get("figure")) for r in records if r.get("level") == "model"}
    out = []
    for d in facts.changes:
        lo, hi = d.figure.bounds
        if _covered(d.figure.name, records) or not (
            d.worse_by >= LARGE_CHANGE * (hi - lo) and d.significant
        ):
            continue
        covering = {d.figure.name, *COVERS.get(d.figure.name, ())}
        why = "its gate cannot fail on this dataset" if covering & gated else "no gate covers it"
        se = f" ± {d.se:.3g}" if math.isfinite(d.se) else ""
        text = (
            f"{d.figure.label} moved {d.baseline:.3f} -> {d.current:.3f} ({d.diff:+.3f}{se} "
            f"paired SE, n={d.n}) and {why}"
        )
        out.append(Reason("ungated_change", text))
    return out


def _mass(who: str, low: int, n: int) -> Reason:
    return Reason("not_answering", f"the {who} is not answering with a letter: clean option "
                  f"mass < {spec.OPTION_MASS_FLAG} on {low} of {n} samples")  # fmt: skip


def _fact_reasons(facts: Facts, records: Sequence[Record]) -> list[Reason]:
    out = []
    n = facts.n or 0
    if facts.low_mass is not None and n and facts.low_mass > MOST * n:
        out.append(_mass("candidate", facts.low_mass, n))
    if facts.base_low_mass is not None:
        low, nb = facts.base_low_mass
        if nb and low > MOST * nb:
            out.append(_mass("baseline", low, nb))
    out.extend(_ungated(facts, records))
    base_ok = facts.base_blind is None or facts.base_blind <= MOST
    if facts.blind is not None and facts.blind > MOST and base_ok:
        improved = sum(1 for r in records if r.get("status") == "improved")
        base = f" (baseline {facts.base_blind:.0%})" if facts.base_blind is not None else ""
        out.append(Reason(
            "image_blind",
            f"the candidate no longer looks at the image: on {facts.blind:.0%} of samples{base} "
            f"its answer distribution moves by less than {BLIND_TV:g} under every corruption; "
            f"its {improved} 'improved' gate(s) are not evidence of robustness",
        ))  # fmt: skip
    return out


__all__ = [
    "CHECKED", "COVERS", "ERROR", "FINISHED", "HEADINGS", "PROBLEM", "Ending", "Overall",
    "Progress", "Reason",
    "conclude",
    "counted", "decide", "group_failures", "grouped_text", "is_powerless", "powerless_gates",
    "raised", "unchecked_gates", "verdict_anchor",
]  # fmt: skip
