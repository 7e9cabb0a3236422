"""A run's one verdict: ``fail``, ``unresolved``, ``inconclusive`` or ``pass``, with reasons.

Why: "no gate failed" is not "the candidate is as robust as its baseline" when the gates could
not have failed. One definition (:func:`decide`) is computed from the gate records and a few
facts about the two runs (:func:`run_facts`), and every output renders that same object: the
terminal summary, ``report.json`` (``overall``), the page's verdict banner, the JUnit suite
properties and the GitHub step summary.

* ``fail``: a gate failed, or a gated case raised before its gates were checked (its figures
  could not be computed, so the other cases' gates cannot vouch for it); the exit code says so
  as before.
* ``unresolved``: no gate failed, but a gated figure moved the worse way by more than its
  printed minimal detectable regression while staying inside this run's own, widened tolerance
  (samples moved both ways): the gate promised to catch a change that size and could not tell.
  Each reason names the figure, its change, its z and the samples that would resolve it.
* ``inconclusive``: no gate failed, but the verdict cannot be trusted, because
  - a model-level or VSI gate cannot fail on this dataset (its minimal detectable regression
    is at least the room its figure has), or most of the checked gates cannot;
  - no gate could be checked, or a model-level gate could not;
  - the candidate (or the baseline) is not answering with a letter: clean option mass
    < :data:`benchc.spec.OPTION_MASS_FLAG` on most samples (:data:`MOST`);
  - a Table II figure moved a long way in its worse direction (:data:`LARGE_CHANGE` of its
    range, and significant: :data:`benchc.report.paired.SIGNIFICANT_Z` paired SEs) and no gate
    that can fail covers it (clean accuracy is reported, not gated);
  - the candidate no longer looks at the image: its option distribution moves by less than
    :data:`BLIND_TV` under every corruption for most samples while the baseline's did not, so
    figures that "improved" are not evidence of robustness.
* ``pass``: every other run with at least one checked gate.

What ``unresolved`` and ``inconclusive`` do to the exit code is the suite's
``--inconclusive`` option (docs/guides/gates.md): ``fail`` exits with
:data:`EXIT_INCONCLUSIVE` (the default under ``--strict-gates``, whose unresolved gates also
fail their cases); ``warn`` (the default otherwise) keeps the exit code and says so everywhere.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchc import spec
from benchc.gates.check import unresolved_text
from benchc.report.paired import Difference, differences
from benchc.results.reader import StoredRun

STATES: tuple[str, ...] = ("fail", "unresolved", "inconclusive", "pass", "none")
#: "Most samples": more than this share.
MOST = 0.5
#: A large change: this share of the figure's range (0.05 of an accuracy, 5 points of a %).
LARGE_CHANGE = 0.05
#: Total variation between a sample's clean and corrupted option distributions below which it
#: did not move: a sample below it under every corruption ignores the image.
BLIND_TV = 0.01
#: The pytest exit status of an inconclusive run under ``--inconclusive=fail`` (pytest's own
#: codes are 0-5).
EXIT_INCONCLUSIVE = 6
#: ``--inconclusive`` values.
MODES: tuple[str, ...] = ("warn", "fail")
#: The count (in :attr:`Overall.counts`) and reason kind of gated cases that raised before
#: their gates were checked.
ERROR = "error"

Record = Mapping[str, Any]
#: Gate statuses that were checked (able to fail).
CHECKED: tuple[str, ...] = ("pass", "fail", "unresolved", "improved")


@dataclass(frozen=True)
class Reason:
    """One cause, once: ``kind`` (``error``, ``failed``, ``unresolved``, ``powerless``,
    ``unchecked``, ``not_answering``, ``ungated_change``, ``image_blind``), its text and how
    many gates it covers."""

    kind: str
    text: str
    gates: int = 0
    #: The page's anchor of the gate it names (one failed gate), else None.
    anchor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "gates": self.gates, "anchor": self.anchor}


@dataclass(frozen=True)
class Facts:
    """What the two runs say beyond the gates (None: not known, e.g. no baseline run)."""

    n: int | None = None
    low_mass: int | None = None
    base_low_mass: tuple[int, int] | None = None
    changes: tuple[Difference, ...] = ()
    blind: float | None = None
    base_blind: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "low_option_mass": self.low_mass,
            "baseline_low_option_mass": list(self.base_low_mass) if self.base_low_mass else None,
            "table2_differences": [d.to_dict() for d in self.changes],
            "image_blind_share": self.blind,
            "baseline_image_blind_share": self.base_blind,
        }


@dataclass(frozen=True)
class Overall:
    """The run's verdict: ``state`` and every reason behind it, the gate counts, the facts."""

    state: str
    reasons: tuple[Reason, ...] = ()
    counts: dict[str, int] = field(default_factory=dict)
    facts: Facts | None = None

    @property
    def headline(self) -> str:
        n_fail = self.counts.get("fail", 0)
        checked = sum(self.counts.get(s, 0) for s in CHECKED)
        if self.state == "fail":
            n_err = self.counts.get(ERROR, 0)
            raised = f"{n_err} gated case(s) raised before their gates were checked"
            if not n_err:
                return f"FAIL: {n_fail} gate(s) failed"
            return f"FAIL: {n_fail} gate(s) failed, {raised}" if n_fail else f"FAIL: {raised}"
        if self.state == "unresolved":
            n = self.counts.get("unresolved", 0)
            return (
                f"UNRESOLVED: no gate failed, but {n} gated figure(s) moved the worse way by "
                "more than their minimal detectable regression and this run cannot tell"
            )
        if self.state == "inconclusive":
            return (
                f"INCONCLUSIVE: no gate failed, but {len(self.reasons)} reason(s) the gates "
                "could not have caught a regression"
            )
        if self.state == "pass":
            return f"PASS: no gate failed ({checked} checked, each able to fail)"
        return "no gate verdicts"

    def lines(self) -> list[str]:
        """The headline, then one ``- reason`` line each (the terminal's and the step
        summary's text)."""
        return [self.headline, *(f"  - {r.text}" for r in self.reasons)]

    def to_dict(self) -> dict[str, Any]:
        """``report.json`` ``overall``."""
        return {
            "state": self.state,
            "headline": self.headline,
            "reasons": [r.to_dict() for r in self.reasons],
            "counts": dict(self.counts),
            "facts": self.facts.to_dict() if self.facts is not None else None,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Overall:
        reasons = tuple(
            Reason(r["kind"], r["text"], int(r.get("gates", 0)), r.get("anchor"))
            for r in d["reasons"]
        )
        return cls(str(d["state"]), reasons, dict(d.get("counts") or {}))


def verdict_anchor(v: Record) -> str:
    """A stable HTML id for one gate verdict (the page's row of it)."""
    raw = f"gate-{v.get('scope') or ''}-{v.get('figure') or ''}"
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in raw)


def is_powerless(record: Record) -> bool:
    """The gate cannot fail on this dataset (its MDR is at least its figure's room)."""
    return bool(record.get("powerless")) or "cannot fail" in str(record.get("reason") or "")


#: A gate that was compared with its baseline (what "checked" counts).
CHECKED = ("pass", "fail", "improved")


def powerless_gates(records: Iterable[Record]) -> list[Record]:
    """The checked gates that cannot fail on this dataset: the one count the verdict's reason
    and the summary's ``POWERLESS`` line both print."""
    return [r for r in records if r.get("status") in CHECKED and is_powerless(r)]


def _counted(records: Sequence[Record]) -> str:
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
    return f"{why} in {len(group)} gate(s) ({_counted(group)})"


def _failed(fails: Sequence[Record]) -> list[Reason]:
    """Failed gates grouped by cause: the same reason (e.g. one figure became undefined) is one
    entry however many gates it failed."""
    by_reason, plain = group_failures(fails)
    out = [Reason("failed", grouped_text(why, g), len(g)) for why, g in by_reason.items()]
    for r in plain:
        out.append(
            Reason(
                "failed",
                f"{r.get('label') or r.get('figure')} in {r.get('scope')}: "
                f"{_fmt(r.get('baseline'))} -> {_fmt(r.get('current'))} "
                f"(tolerance {_fmt(r.get('tolerance'))})",
                1,
                verdict_anchor(r),
            )
        )
    return out


def _unresolved(r: Record) -> Reason:
    return Reason("unresolved", unresolved_text(r), 1, verdict_anchor(r))


def decide(records: Iterable[Record], facts: Facts | None = None) -> Overall:
    """The one verdict of a run's gate ``records`` (:meth:`benchc.gates.Outcome.to_dict`) and
    ``facts`` (:func:`run_facts`)."""
    records = [r for r in records if r.get("status") not in ("recorded", "kept")]
    counts = dict(Counter(str(r.get("status")) for r in records))
    checked = [r for r in records if r.get("status") in CHECKED]
    fails = [r for r in records if r.get("status") == "fail"]
    unresolved = [_unresolved(r) for r in records if r.get("status") == "unresolved"]
    doubts: list[Reason] = []
    powerless = powerless_gates(checked)
    headline_gates = [r for r in powerless if r.get("level") in ("model", "vsi")]
    if headline_gates or (checked and len(powerless) * 2 > len(checked)):
        doubts.append(
            Reason(
                "powerless",
                f"{len(powerless)} of {len(checked)} checked gate(s) cannot fail on this dataset "
                f"(minimal detectable regression >= the room the figure has: "
                f"{_counted(powerless)}); more samples give them power",
                len(powerless),
            )
        )
    unchecked = [r for r in records if r.get("status") == "unchecked"]
    if records and not checked:
        doubts.append(Reason("unchecked", f"no gate could be checked ({len(unchecked)} unchecked)",
                             len(unchecked)))  # fmt: skip
    elif any(r.get("level") == "model" for r in unchecked):
        model = [r for r in unchecked if r.get("level") == "model"]
        doubts.append(
            Reason(
                "unchecked",
                f"{len(model)} model-level gate(s) could not be checked ({_counted(model)})",
                len(model),
            )
        )
    if facts is not None:
        doubts.extend(_fact_reasons(facts, checked))
    if fails:
        return Overall("fail", (*_failed(fails), *unresolved, *doubts), counts, facts)
    if not records:
        return Overall("none", tuple(doubts), counts, facts)
    if unresolved:
        return Overall("unresolved", (*unresolved, *doubts), counts, facts)
    return Overall("inconclusive" if doubts else "pass", tuple(doubts), counts, facts)


def raised(errored: Sequence[Mapping[str, str]]) -> list[str]:
    """One line per distinct error of the gated cases that raised (``{"case", "error"}`` each):
    ``"12 case(s) raised (test_cell[fog-1], ... and 9 more): ValueError: ..."``."""
    by_error: dict[str, list[str]] = {}
    for e in sorted(errored, key=lambda e: str(e.get("case"))):  # xdist: in any order
        by_error.setdefault(str(e.get("error")), []).append(str(e.get("case")))
    out = []
    for error, cases in by_error.items():
        more = f" and {len(cases) - 3} more" if len(cases) > 3 else ""
        out.append(f"{len(cases)} case(s) raised ({', '.join(cases[:3])}{more}): {error}")
    return out


def with_errors(overall: Overall, errored: Sequence[Mapping[str, str]]) -> Overall:
    """``overall`` failed by the gated cases that raised before their gates were checked: none
    of their gates has a record, so without this the verdict would be decided on the cases that
    did not raise."""
    if not errored:
        return overall
    reasons = [Reason(ERROR, text) for text in raised(errored)]
    counts = {**overall.counts, ERROR: len(errored)}
    return Overall("fail", (*reasons, *overall.reasons), counts, overall.facts)


def _fact_reasons(facts: Facts, checked: Sequence[Record]) -> list[Reason]:
    out = []
    n = facts.n or 0
    if facts.low_mass is not None and n and facts.low_mass > MOST * n:
        out.append(
            Reason(
                "not_answering",
                f"the candidate is not answering with a letter: clean option mass < "
                f"{spec.OPTION_MASS_FLAG} on {facts.low_mass} of {n} samples",
            )
        )
    if facts.base_low_mass is not None:
        low, nb = facts.base_low_mass
        if nb and low > MOST * nb:
            out.append(
                Reason(
                    "not_answering",
                    f"the baseline is not answering with a letter: clean option mass < "
                    f"{spec.OPTION_MASS_FLAG} on {low} of {nb} samples",
                )
            )
    covered = {
        str(r.get("figure")) for r in checked if r.get("level") == "model" and not is_powerless(r)
    }
    for d in facts.changes:
        lo, hi = d.figure.bounds
        large = LARGE_CHANGE * (hi - lo)
        if d.figure.name in covered or not (d.worse_by >= large and d.significant):
            continue
        why = "no gate covers it" if d.figure.name not in {str(r.get("figure")) for r in checked
                                                          if r.get("level") == "model"} else (
            "its gate cannot fail on this dataset")  # fmt: skip
        se = f" ± {d.se:.3g}" if math.isfinite(d.se) else ""
        out.append(
            Reason(
                "ungated_change",
                f"{d.figure.label} moved {d.baseline:.3f} -> {d.current:.3f} "
                f"({d.diff:+.3f}{se} paired SE, n={d.n}) and {why}",
            )
        )
    if (
        facts.blind is not None
        and facts.blind > MOST
        and (facts.base_blind is None or facts.base_blind <= MOST)
    ):
        improved = sum(1 for r in checked if r.get("status") == "improved")
        base = f" (baseline {facts.base_blind:.0%})" if facts.base_blind is not None else ""
        out.append(
            Reason(
                "image_blind",
                f"the candidate no longer looks at the image: on {facts.blind:.0%} of samples"
                f"{base} its answer distribution moves by less than {BLIND_TV:g} under every "
                f"corruption; its {improved} 'improved' gate(s) are not evidence of robustness",
            )
        )
    return out


# -- facts ---------------------------------------------------------------------------------------
def _probs(logits: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, padded options (NaN) at 0."""
    x = np.where(np.isnan(logits), -np.inf, logits.astype(np.float64))
    x = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def blind_share(run: StoredRun) -> float | None:
    """The share of samples whose option distribution moves by less than :data:`BLIND_TV`
    (total variation) under every corruption and severity; None without a grid."""
    if run.logits is None or run.clean_logits is None or not len(run.ids):
        return None
    p = _probs(run.clean_logits)[:, None, None, :]
    tv = 0.5 * np.abs(_probs(run.logits) - p).sum(axis=-1)  # (N, D, L)
    return float((tv.reshape(len(run.ids), -1).max(axis=1) < BLIND_TV).mean())


def _low_mass(run: StoredRun) -> int | None:
    if run.option_mass is None:
        return None
    return int((run.option_mass < spec.OPTION_MASS_FLAG).sum())


def run_facts(candidate: StoredRun, baseline: StoredRun | None) -> Facts:
    """The facts :func:`decide` reads, from the candidate and the baseline's run as the report
    draws them (like for like: :func:`benchc.report.data.like_for_like`)."""
    changes: tuple[Difference, ...] = ()
    base_mass = None
    base_blind = None
    if baseline is not None:
        diffs = differences(baseline, candidate)
        changes = tuple(diffs.values()) if diffs else ()
        low = _low_mass(baseline)
        base_mass = (low, len(baseline.ids)) if low is not None else None
        base_blind = blind_share(baseline)
    return Facts(
        n=len(candidate.ids),
        low_mass=_low_mass(candidate),
        base_low_mass=base_mass,
        changes=changes,
        blind=blind_share(candidate),
        base_blind=base_blind,
    )


__all__ = [
    "CHECKED", "EXIT_INCONCLUSIVE", "MODES", "STATES", "Facts", "Overall", "Reason",
    "blind_share", "decide", "group_failures", "grouped_text", "is_powerless", "run_facts",
    "unresolved_text",
]  # fmt: skip
