"""Honest recording: what ``--snapshot-update`` recorded that no later run can gate.

A gate undefined on the baseline (a VSI set too small for the probe's five grouped folds, a
backend without a vision tower) makes every ``--strict-gates`` run fail, and a gate whose
minimal detectable regression exceeds the room its figure has left cannot fail on this dataset.
Recording ends with one block naming both, each undefined gate with its reason and remedy
(:func:`remedy`), so the baseline's owner learns it when recording, not from the next release.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchc.gates import Payload
from benchc.gates.check import ZFor, check

#: Grouped folds of the encoder-LLM gap's probe (docs/spec.md §5).
PROBE_FOLDS = 5


def _why_vsi(payload: Payload | None) -> str | None:
    """Why the gap's probe could not be fitted on ``payload``'s low-VSI pool, in numbers."""
    ev = getattr(payload, "evidence", None)
    if ev is None or not hasattr(ev, "pool"):
        return None
    if payload is not None and str(payload.info.get("probe", "")).startswith("none"):
        return "the model has no vision tower to probe (the gap needs one)"
    pool, control = ev.pool, ev.control
    images = len(set(ev.groups[pool].tolist()))
    controls = len(set(ev.groups[control].tolist()))
    return (
        f"the low-VSI pool holds {int(pool.sum())} samples of {images} distinct image(s) and its "
        f"high-VSI control {controls}; the probe needs {PROBE_FOLDS} distinct images in each for "
        f"{PROBE_FOLDS} grouped folds"
    )


def cause(figure: str, reason: str | None, baseline: Payload | None) -> str:
    """Why a gate is undefined on its baseline, in numbers where benchc can give them."""
    if figure == "gap":
        why = _why_vsi(baseline)
        if why:
            return f"{reason}: {why}" if reason else why
    return reason or f"{figure} is undefined on the baseline"


def remedy(figure: str, reason: str | None, path: Path | str, baseline: Payload | None) -> str:
    """What to do about a gate that is undefined on its baseline (``reason``); ``path``: its
    snapshot file, or words naming the files of several such gates. The rule to write is the
    snapshot's own with ``:off`` appended (its direction and floor as recorded)."""
    rules = [r for r in getattr(baseline, "rules", ()) if r.figure == figure]
    off = (
        f"changing its rule to '{replace(rules[0], off=True)}'"
        if rules
        else "adding ':off' to its rule"
    )
    switch = f"switch the gate off in {path} by {off} (re-recording keeps it off)"
    if figure == "gap":
        if str(getattr(baseline, "info", {}).get("probe", "")).startswith("none"):
            return (
                f"gate the gap on a model whose vision tower benchc runs (white-box), or {switch}"
            )
        return (
            f"record the baseline on a larger --vsi-dataset (more low-VSI samples of distinct "
            f"images), or {switch}"
        )
    return f"record on a dataset where {figure} is defined, or {switch}"


def recorded_records(
    case: str, payload: Payload, path: Path, *, z_for: ZFor, seed: int
) -> list[dict[str, Any]]:
    """``recorded`` verdict records of the undefined and the powerless gates of a payload just
    recorded (the others need no word)."""
    out = []
    for o in check(payload, payload, z_for=z_for, seed=seed).outcomes:
        base = {"case": case, "scope": payload.scope, "level": payload.level,
                "figure": o.spec.name, "status": "recorded"}  # fmt: skip
        if o.status == "off":
            continue
        if not math.isfinite(o.baseline):
            out.append({**base, "undefined": cause(o.spec.name, o.reason, payload),
                        "remedy": remedy(o.spec.name, o.reason, path, payload),
                        "file": str(path)})  # fmt: skip
        elif o.powerless:
            out.append({**base, "powerless": o.powerless})
    return out


def recording_block(
    records: Sequence[dict[str, Any]], label: str, errored: Sequence[dict[str, Any]] = ()
) -> list[str]:
    """The one block ``--snapshot-update`` ends with: the cases that raised and so recorded
    nothing, undefined gates (reason, remedy), then gates that cannot fail on this dataset,
    counted by figure and level."""
    undefined = [r for r in records if r.get("status") == "recorded" and r.get("undefined")]
    powerless = [r for r in records if r.get("status") == "recorded" and r.get("powerless")]
    lines = []
    if errored:
        lines.append(
            f"baseline {label} is incomplete: {len(errored)} case(s) raised and recorded "
            "nothing (no later run can gate them until they are recorded):"
        )
        from benchc.gates.verdict import raised

        lines.extend(f"  {text}" for text in raised(errored))
    if not undefined and not powerless:
        if not errored:
            return [
                f"recorded baseline {label}: every gate is defined and can fail on this dataset"
            ]
        return lines
    lines.append(f"recorded baseline {label}, with gates no later run can check:")
    if undefined:
        lines.append(
            f"  {len(undefined)} gate(s) undefined on the baseline (--strict-gates fails on "
            "them until fixed):"
        )
        # one entry per figure and cause: a small dataset leaves e.g. R_c undefined in every
        # cell, family and the model at once, which reads as one fact, not 101
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for r in undefined:
            groups[(r["figure"], r["undefined"])].append(r)
        for (figure, why), group in groups.items():
            if len(group) == 1:
                lines.append(f"    {figure} in {group[0]['scope']}: {why}")
                lines.append(f"      remedy: {group[0]['remedy']}")
                continue
            files = sorted({Path(r["file"]) for r in group if r.get("file")})
            folders = sorted({str(f.parent) for f in files})
            where = (
                f"each of their {len(files)} files in {', '.join(folders)}"
                if files
                else "each of their files"
            )
            lines.append(f"    {figure} in {_levels(group)}: {why}")
            lines.append(f"      remedy: {remedy(figure, None, where, None)}")
    if powerless:
        counts = Counter(r["figure"] for r in powerless)
        lines.append(
            f"  {len(powerless)} gate(s) cannot fail on this dataset (minimal detectable "
            "regression >= the room the figure has; more samples give them power):"
        )
        for fig in sorted(counts):
            lines.append(f"    {fig}: {_levels([r for r in powerless if r['figure'] == fig])}")
    return lines


def _levels(records: Sequence[dict[str, Any]]) -> str:
    """``"95 cell, 5 family, 1 model"``: how many of ``records`` sit at each level."""
    by_level = Counter(r["level"] for r in records)
    return ", ".join(f"{n} {lvl}" for lvl, n in sorted(by_level.items()))


__all__ = ["cause", "recorded_records", "recording_block", "remedy"]
