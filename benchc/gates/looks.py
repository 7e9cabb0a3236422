"""The sequential gate's looks (``--looks K``, ``--look k``): what a look covered and what the
run does next, decided in one place.

A look gates the dataset's first ``--limit`` samples (the VSI gates the first ``--limit`` of
their own set) against a baseline recorded on all of them, with the false-alarm budget spent
evenly over the K looks (:class:`benchc.gates.budget.ErrorBudget`: Bonferroni over looks, which
holds the family-wise error whatever decides to take the next look). The rule:

* a FAIL is final: no next look;
* PASS ends the design;
* UNRESOLVED or INCONCLUSIVE with samples left and looks left: the next look's command, with
  ``--limit`` the remaining samples split evenly over the remaining looks, or more where an
  unresolved gate needs more (its ``resolve_n``), never past the dataset;
* a look that already covers every sample (its ``--limit`` at or past the dataset), or the
  last look, ends the design: the verdict stands, and it says so.

Pure: the verdict's state, the gate records and the look's settings in, lines out; the client
builds the command (``command(limit, look)``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from benchc.gates.budget import ErrorBudget

if TYPE_CHECKING:  # scipy's integrate and optimize load only for a sequential run (~0.3 s)
    from benchc.gates.design import Design, GateDesign, LookDecision

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Coverage:
    """What a look compared: ``n`` of ``available`` grid samples, and of the VSI set."""

    n: int
    available: int
    vsi_n: int = 0
    vsi_available: int = 0

    @property
    def left(self) -> int:
        return max(0, self.available - self.n)


def coverage(records: Sequence[Record]) -> Coverage | None:
    """The samples a look's gate records compared (None: no record says)."""
    grid = [r for r in records if r.get("n") and r.get("level") not in ("vsi", "sample")]
    vsi = [r for r in records if r.get("n") and r.get("level") == "vsi"]
    if not grid and not vsi:
        return None
    n = max((int(r["n"]) for r in grid), default=0)
    available = max((int(r.get("n_available") or r["n"]) for r in grid), default=0)
    vsi_n = max((int(r["n"]) for r in vsi), default=0)
    vsi_available = max((int(r.get("n_available") or r["n"]) for r in vsi), default=0)
    return Coverage(n, max(available, n), vsi_n, max(vsi_available, vsi_n))


def header(look: int, looks: int, limit: int | None, cov: Coverage | None) -> str:
    """The look's first line: which look, on which samples of the grid and of the VSI set."""
    if cov is None:
        scope = f"the first {limit} samples" if limit is not None else "every sample"
    else:
        scope = f"{cov.n} of the dataset's {cov.available} samples"
        if cov.vsi_available:
            scope += f" and {cov.vsi_n} of the VSI set's {cov.vsi_available}"
        if limit is not None and limit > cov.available:
            scope += f" (--limit {limit} is past the dataset: this look sees every sample)"
    return (
        f"sequential gate: look {look} of {looks} on {scope} (each gate's share of the "
        "false-alarm budget spent over the looks by O'Brien-Fleming-type alpha spending; early "
        "PASS by beta spending at P = 90 %)"
    )


def next_limit(records: Sequence[Record], cov: Coverage, look: int, looks: int) -> int:
    """The next look's ``--limit``: the samples left split evenly over the looks left, or
    what an unresolved gate needs (``resolve_n``) where that is more, at most the dataset."""
    even = cov.n + math.ceil(cov.left / max(1, looks - look))
    wanted = max((int(r.get("resolve_n") or 0) for r in records
                  if r.get("status") == "unresolved"), default=0)  # fmt: skip
    return min(cov.available, max(even, wanted, cov.n + 1))


def after_look(
    state: str,
    records: Sequence[Record],
    *,
    look: int,
    looks: int,
    command: Callable[[int | None, int], str],
) -> list[str]:
    """The lines after a look of verdict ``state``: the next look's command, or why the design
    ended (``command(limit, look)``: the client's command for a look; ``limit`` None: every
    sample)."""
    if state in ("pass", "fail") or state not in ("unresolved", "inconclusive"):
        if looks > 1 and state in ("pass", "fail"):
            final = "FAIL is final" if state == "fail" else "PASS ends it"
            return [f"sequential gate: {final} at look {look} of {looks}; no next look"]
        return []
    cov = coverage(records)
    if looks <= 1:
        if cov is None or not cov.left:
            return []
        return [
            f"{state.upper()} with {cov.left} of the baseline's {cov.available} samples unused: "
            "only a sequential gate may take more of them without spending more than the "
            "false-alarm budget; start a release's gate with --looks=K (e.g. --looks=2) so a "
            "look that cannot decide can be extended"
        ]
    if cov is None or not cov.left or look >= looks:
        why = "every sample" if cov is None or not cov.left else "the last look"
        return [f"sequential gate: the design has ended at look {look} of {looks} ({why}): "
                f"the verdict {state.upper()} stands"]  # fmt: skip
    take = next_limit(records, cov, look, looks)
    vsi = ""
    if cov.vsi_available:
        share = f"first {take}" if take < cov.available else f"{cov.vsi_available}"
        vsi = f" (and the VSI set's {share} of its {cov.vsi_available})"
    return [
        f"next look ({look + 1} of {looks}) with {take} of the dataset's {cov.available} "
        f"samples{vsi}, the same budget per look:",
        f"    {command(None if take >= cov.available else take, look + 1)}",
    ]


#: Gate statuses a look's design judges (compared with the baseline).
_JUDGED = ("pass", "fail", "unresolved", "improved")


def _worse(r: Record) -> float:
    change = float(r.get("change") or 0.0)
    return -change if r.get("direction") == "higher" else change


def _sizes(budget: ErrorBudget, total: int) -> tuple[int, ...]:
    """Look sizes of the budget's information fractions on ``total`` samples (rising)."""
    out: list[int] = []
    for t in budget.information:
        out.append(max(round(t * total), (out[-1] + 1) if out else 1))
    return tuple(out)


def _gate(design: Design, budget: ErrorBudget, r: Record, look: int) -> GateDesign:
    """One record's group-sequential plan: its share of the budget, the SE it would have on all
    the design's samples under no change (its SE_null at this look's information), its floor
    and the room its figure has left."""
    from benchc.gates.figures import figure

    t = design.fractions[look - 1]
    se_null = float(r.get("se_null") or 0.0)
    room = figure(str(r["level"]), str(r["figure"])).room(float(r["baseline"]))
    room = room if math.isfinite(room) else math.inf
    return design.gate(budget.alpha_for(r["level"]), se_null * math.sqrt(t),
                       float(r.get("floor") or 0.0), room, str(r.get("figure")))  # fmt: skip


def sequential(
    records: Sequence[Record], budget: ErrorBudget, *, power: float = 0.9
) -> tuple[list[dict[str, Any]], LookDecision | None]:
    """A look of a group-sequential design (``--looks K``): each judged gate failed at the
    look's boundary already (its z is the look's bound); one whose change lies below its
    futility bound (O'Brien-Fleming-type beta spending under a true change of MDR_P, non-binding)
    stays PASS; every other is UNRESOLVED, between its bounds: the next look decides. The last
    look judges each gate as a fixed gate does, at the look's spent bound (its record's own
    status: UNRESOLVED only beyond its MDR), so benign noise wider than planned ends as the fixed
    design ends it. One look: unchanged."""
    judged = [i for i, r in enumerate(records) if r.get("status") in _JUDGED
              and r.get("baseline") is not None and r.get("se_diff") is not None]  # fmt: skip
    if budget.looks <= 1 or not judged:
        return [dict(r) for r in records], None
    from benchc.gates.design import Design

    total = max(int(records[i].get("n_available") or records[i].get("n") or 1) for i in judged)
    design = Design(_sizes(budget, total), spending=budget.spending, power=power)
    k = budget.look
    gates = [_gate(design, budget, records[i], k) for i in judged]
    worse = [_worse(records[i]) for i in judged]
    se = [float(records[i]["se_diff"]) for i in judged]
    n = max(int(records[i].get("n") or 1) for i in judged)
    decision = design.decide(k, gates, worse, se, n)
    out = [dict(r) for r in records]
    if decision.verdict == "PASS":  # the design's power stands for each look's own: a gate
        for i in judged:  # powerless at this look's bound is not a reason to doubt the PASS
            if "cannot fail" in str(out[i].get("reason") or ""):
                out[i]["reason"] = None
            out[i]["powerless"] = False
    if k == budget.looks:  # the last look judges each gate as a fixed gate at its spent bound
        return out, decision  # (the record's own check at z = c_K: tolerance, MDR, UNRESOLVED)
    for j, i in enumerate(judged):
        if decision.states[j] == "continue" and out[i]["status"] != "fail":
            out[i].update(status="unresolved", resolve_n=design.sizes[k],
                          reason=f"look {k} of {budget.looks}: between its bounds: the next "
                          "look decides")  # fmt: skip
    return out, decision


__all__ = ["Coverage", "after_look", "coverage", "header", "next_limit", "sequential"]
