"""``benchc compare`` on any set of stored runs: what they share, and what was left out.

Runs recorded over different grids (other corruptions, other severities: a subset run, a
``--severities 1,3`` run) or on overlapping datasets are compared on what every run with a grid
has: the corruption x severity cells all of them hold and, when they score the same samples,
the sample ids all of them hold. What was left out is said, per run, on the page and in
``report.json`` (``compare.left_out``). Runs with nothing in common are a :class:`CompareError`
(a bad request, not a damaged store), which names what each run has.

One sign convention everywhere (docs/spec.md §6): a difference is *candidate - baseline*; in a
comparison the first run is the baseline every other run is read against.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from benchc import spec
from benchc.results.reader import StoredRun

#: The words for the one sign convention of every difference the page and report.json show.
SIGN = "candidate − baseline"


class CompareError(ValueError):
    """Runs that cannot be compared as asked (no shared cell, too few runs): a bad request,
    not a damaged results folder."""


@dataclass
class Shared:
    """The runs restricted to what they share, and what was left out (one line per run)."""

    runs: list[StoredRun]
    corruptions: tuple[str, ...] = ()
    severities: tuple[int, ...] = ()
    n_samples: int | None = None
    left_out: list[str] = field(default_factory=list)

    def block(self) -> dict[str, Any]:
        """``report.json`` ``compare``."""
        return {
            "sign": SIGN,
            "corruptions": list(self.corruptions),
            "severities": list(self.severities),
            "n_samples": self.n_samples,
            "left_out": list(self.left_out),
        }


def _grid_shape(run: StoredRun) -> str:
    sev = ",".join(str(s) for s in run.severities) or "none"
    names = ", ".join(run.corruptions[:4]) + (", ..." if len(run.corruptions) > 4 else "")
    return f"{len(run.corruptions)} corruptions ({names}) x severities {sev}"


def restrict(
    run: StoredRun, rows: np.ndarray | None, cs: Sequence[str], ss: Sequence[int]
) -> StoredRun:
    """``run`` on sample ``rows`` (None: all) and cells ``cs`` x ``ss`` (its rotated conditions
    too: clean and those cells); its VSI rows keep their own ids, so the VSI blocks still match
    them by id."""
    ci = [run.corruptions.index(c) for c in cs]
    si = [run.severities.index(s) for s in ss]
    r = np.arange(len(run.ids)) if rows is None else rows
    logits = None if run.logits is None else run.logits[r][:, ci][:, :, si]
    vsi_ids, vsi_answers = run.vsi_ids, run.vsi_answers
    if run.vsi is not None and vsi_ids is None:
        vsi_ids, vsi_answers = run.ids, run.answers if vsi_answers is None else vsi_answers
    kept = {spec.CLEAN, *(spec.condition_key(c, s) for c in cs for s in ss)}
    order = {
        key: {name: np.asarray(a)[r] for name, a in arrays.items()}
        for key, arrays in (run.order or {}).items()
        if key in kept
    }
    return replace(
        run,
        ids=tuple(run.ids[i] for i in r),
        answers=run.answers[r],
        n_options=run.n_options[r],
        clean_logits=None if run.clean_logits is None else run.clean_logits[r],
        option_mass=None if run.option_mass is None else run.option_mass[r],
        logits=logits,
        corruptions=tuple(cs),
        severities=tuple(ss),
        vsi_ids=vsi_ids,
        vsi_answers=vsi_answers,
        order=order,
    )


def shared(runs: Sequence[StoredRun], labels: Sequence[str]) -> Shared:
    """Every run with a grid restricted to the cells all of them have (in the first such run's
    order) and, when they score the same samples (a shared id has the same answer in every
    run), to the ids all of them have. Runs without a grid are kept as they are."""
    if len(runs) < 2:
        raise CompareError(f"compare needs at least two runs, got {len(runs)}")
    grids = [i for i, r in enumerate(runs) if r.logits is not None and r.clean_logits is not None]
    out = Shared(list(runs))
    if len(grids) < 2:
        return out
    first = runs[grids[0]]
    cs = [c for c in first.corruptions if all(c in runs[i].corruptions for i in grids)]
    ss = [s for s in first.severities if all(s in runs[i].severities for i in grids)]
    if not cs or not ss:
        have = "; ".join(f"{labels[i]}: {_grid_shape(runs[i])}" for i in grids)
        raise CompareError(f"the runs share no corruption x severity cell ({have})")
    n_cells = len(cs) * len(ss)
    for i in grids:
        n = len(runs[i].corruptions) * len(runs[i].severities)
        if n > n_cells:
            out.left_out.append(
                f"{labels[i]}: {n - n_cells} of its {n} cells left out (not in every run; "
                f"compared on {len(cs)} corruptions x severities {','.join(map(str, ss))})"
            )
    sets = [set(runs[j].ids) for j in grids]
    ids = [i for i in first.ids if all(i in s for s in sets)]
    answers = {sid: a for sid, a in zip(first.ids, first.answers.tolist(), strict=True)}
    index = {j: {sid: k for k, sid in enumerate(runs[j].ids)} for j in grids}
    same = bool(ids) and all(
        runs[j].answers[index[j][sid]] == answers[sid] for j in grids for sid in ids
    )
    rows: dict[int, np.ndarray | None] = dict.fromkeys(grids)
    if same:
        for j in grids:
            r = runs[j]
            if len(r.ids) > len(ids):
                rows[j] = np.array([index[j][sid] for sid in ids])
                out.left_out.append(
                    f"{labels[j]}: {len(r.ids) - len(ids)} of its {len(r.ids)} samples left "
                    "out (not in every run)"
                )
        out.n_samples = len(ids)
    else:
        out.left_out.append(
            "the runs score different samples: each run's figures are over its own samples"
        )
    out.corruptions, out.severities = tuple(cs), tuple(ss)
    out.runs = [restrict(r, rows[i], cs, ss) if i in rows else r for i, r in enumerate(runs)]
    return out


def paired(runs: Sequence[StoredRun], labels: Sequence[str]) -> dict[str, Any]:
    """``report.json`` ``compare.paired``: every later run against the first (candidate −
    baseline), each Table II figure's difference ± its paired bootstrap SE over the samples
    both hold and whether it is significant (:mod:`benchc.gates.paired`), with a one-line
    ``summary`` per pair and for the whole comparison."""
    from benchc.gates.paired import N_BOOT, SIGNIFICANT_Z, differences

    pairs = []
    for run, label in zip(runs[1:], labels[1:], strict=True):
        diffs = differences(runs[0], run)
        if diffs is None:
            pairs.append({"baseline": labels[0], "candidate": label, "n": None,
                          "differences": [], "summary": f"{label} − {labels[0]}: not paired "
                          "(no shared cell or sample: nothing to resample together)"})  # fmt: skip
            continue
        n = next(iter(diffs.values())).n
        sig = [d for d in diffs.values() if d.significant]
        shown = ", ".join(f"{d.figure.label} {d.diff:+.3f} ± {d.se:.3f}" for d in sig) or "none"
        pairs.append(
            {
                "baseline": labels[0],
                "candidate": label,
                "n": n,
                "differences": [d.to_dict() for d in diffs.values()],
                "summary": f"{label} − {labels[0]} on {n} paired samples: {len(sig)} of "
                f"{len(diffs)} Table II figures differ significantly (|Δ| ≥ {SIGNIFICANT_Z:g} "
                f"paired SE): {shown}",
            }
        )
    return {
        "sign": SIGN,
        "n_boot": N_BOOT,
        "z": SIGNIFICANT_Z,
        "pairs": pairs,
        "summary": "; ".join(p["summary"] for p in pairs),
    }


__all__ = ["SIGN", "CompareError", "Shared", "paired", "restrict", "shared"]
