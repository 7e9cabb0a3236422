"""Churn in context: beside a negative-flip gate, the answers that turned the other way too.

The negative flip rate counts the baseline's right answers the candidate lost, and a failing gate
lists those samples. A candidate that lost 6 and gained 8 reads the same as one that lost 6 and
gained none, so a release manager cannot tell a trade from a loss. This counts both directions on
the same pairs the gate compared and names the samples that turned right. Whether a trade fails is
the gate's rule (docs/guides/gates.md): it still fails on the lost answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchc.gates.evidence import GridEvidence

#: The negative-flip figures and whether each counts the clean condition (else the corrupted).
NEGATIVE_FLIPS = {"negative_flips": False, "negative_flips_clean": True}
#: Samples named per direction.
NAMED = 5


@dataclass(frozen=True)
class Churn:
    """Right -> wrong (``lost``) and wrong -> right (``gained``) answers over ``units``."""

    lost: int
    gained: int
    units: int
    unit: str
    #: (sample id, answers that turned right), most first.
    gained_samples: tuple[tuple[str, int], ...] = ()

    def lines(self) -> list[str]:
        net = self.gained - self.lost
        out = [
            f"  churn: {self.lost} right -> wrong, {self.gained} wrong -> right (net {net:+d} "
            f"right) over {self.units} {self.unit}"
        ]
        if self.gained_samples:
            named = ", ".join(f"{sid} ({k})" for sid, k in self.gained_samples)
            out.append(f"  samples that moved wrong -> right (answers turned right): {named}")
        if net >= 0 and self.lost:
            out.append(
                "  as many or more answers turned right as wrong: a trade, not only a loss; the "
                "gate still fails on the lost ones (docs/guides/gates.md, negative flips)"
            )
        return out


def _columns(ev: GridEvidence, clean: bool) -> dict[str, int]:
    if clean:
        return {"clean": 0}
    return {c: i + 1 for i, c in enumerate(ev.conditions)}


def churn(base: GridEvidence, cur: GridEvidence, *, clean: bool) -> Churn | None:
    """Both directions on the samples and conditions both sides hold (None: none shared)."""
    ids = [sid for sid in base.ids if sid in set(cur.ids)]
    cols_b, cols_c = _columns(base, clean), _columns(cur, clean)
    conds = [c for c in cols_b if c in cols_c]
    if not ids or not conds:
        return None
    rb = {sid: i for i, sid in enumerate(base.ids)}
    rc = {sid: i for i, sid in enumerate(cur.ids)}
    b = base.correctness[np.ix_([rb[s] for s in ids], [cols_b[c] for c in conds])]
    c = cur.correctness[np.ix_([rc[s] for s in ids], [cols_c[c] for c in conds])]
    lost, gained = b & ~c, ~b & c
    per_sample = gained.sum(axis=1)
    order = sorted(np.flatnonzero(per_sample), key=lambda i: (-per_sample[i], ids[i]))[:NAMED]
    unit = "samples (clean)" if clean else "(sample, corrupted condition) pairs"
    return Churn(
        int(lost.sum()), int(gained.sum()), int(b.size), unit,
        tuple((ids[i], int(per_sample[i])) for i in order),
    )  # fmt: skip


def churn_lines(outcomes: Sequence[Any], baseline: Any, current: Any) -> list[str]:
    """The churn lines for the negative-flip gates among ``outcomes`` (failed or unresolved),
    from the two payloads' evidence; nothing for other gates or without grid evidence."""
    base, cur = getattr(baseline, "evidence", None), getattr(current, "evidence", None)
    if not isinstance(base, GridEvidence) or not isinstance(cur, GridEvidence):
        return []
    out: list[str] = []
    for outcome in outcomes:
        name = outcome.spec.name
        if name not in NEGATIVE_FLIPS:
            continue
        try:
            found = churn(base, cur, clean=NEGATIVE_FLIPS[name])
        except Exception:  # evidence the gate itself could not read: it says so
            continue
        if found is not None:
            out += [f"{name} in {outcome.scope}:", *found.lines()]
    return out


__all__ = ["NEGATIVE_FLIPS", "Churn", "churn", "churn_lines"]
