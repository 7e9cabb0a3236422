"""One case, baseline against current: the gate pipeline the live suite and the offline report
both run, so a case is comparable, checked and counted by the same rules in either.

:func:`check_case` decides comparability (:data:`SETTINGS_KEYS`), checks the snapshot's rules
and calls the one decision, :func:`benchc.gates.check`; :func:`record_command` is the one
command that re-records a model's thresholds.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchc import spec
from benchc.gates.check import Verdict, ZFor, check
from benchc.gates.payload import Payload
from benchc.gates.rules import RuleError, check_rules

#: Info keys that must agree for a comparison to mean anything (else: re-record).
SETTINGS_KEYS: tuple[str, ...] = ("dataset_fingerprint", "image_size", "seed", "vsi_variant")
#: Info keys that may differ but are said in every verdict of the case when they do: the
#: scikit-learn release splits the probe's folds (GroupKFold assignments change between
#: releases, docs/spec.md §5), which moves a gap by far less than its floor.
NOTE_KEYS: tuple[str, ...] = ("sklearn",)
#: Info key listing the cells a grid-level snapshot was recorded over.
GRID_KEY = "conditions"


def settings_mismatch(baseline: Payload, current: Payload) -> list[tuple[str, Any, Any]]:
    """``(key, recorded, current)`` for every setting the two sides disagree on."""
    return [
        (k, baseline.info.get(k), current.info.get(k))
        for k in SETTINGS_KEYS
        if baseline.info.get(k) != current.info.get(k)
    ]


@dataclass(frozen=True)
class CaseResult:
    """A checked case: its verdict, or why it could not be checked (``problem``) and, for
    settings that differ, which (``mismatch``)."""

    verdict: Verdict | None = None
    problem: str | None = None
    mismatch: tuple[tuple[str, Any, Any], ...] = ()


def check_case(
    baseline: Payload, current: Payload, *, z_for: ZFor, seed: int, where: str
) -> CaseResult:
    """The one pipeline: comparable settings, valid rules, then the paired check."""
    mismatch = settings_mismatch(baseline, current)
    if mismatch:
        keys = ", ".join(k for k, _, _ in mismatch)
        return CaseResult(problem=f"snapshot recorded under other settings ({keys})",
                          mismatch=tuple(mismatch))  # fmt: skip
    try:
        check_rules(baseline.rules, baseline.level, where=where)
    except RuleError as exc:
        return CaseResult(problem=str(exc))
    verdict = check(baseline, current, z_for=z_for, seed=seed)
    notes = [
        f"{k} {current.info.get(k)} here, {baseline.info.get(k)} when recorded"
        for k in NOTE_KEYS
        if k in baseline.info and baseline.info.get(k) != current.info.get(k)
    ]
    if notes:
        verdict = Verdict(verdict.scope, tuple(
            replace(o, reason="; ".join(x for x in (o.reason, *notes) if x))
            for o in verdict.outcomes
        ))  # fmt: skip
    return CaseResult(verdict=verdict)


#: The settings a re-record command carries (the suite's option names, ``--image-size``...).
RECORD_SETTINGS = (
    "model", "dataset", "corruptions", "severities", "image_size", "seed", "vsi_support",
    "thresholds_dir",
)  # fmt: skip


def record_command(
    settings: Mapping[str, Any], *, defaults: Mapping[str, str] | None = None
) -> str:
    """The one command that records a model's thresholds from :data:`RECORD_SETTINGS`; a
    setting at its default (missing, None, or the value in ``defaults``) is left out."""
    get, defaults = settings.get, defaults or {}
    parts = ["pytest", "benchc_tests/suite"]
    for key in ("model", "dataset"):
        if get(key) and get(key) != defaults.get(key):
            parts.append(f"--{key}={get(key)}")
    if get("corruptions") is not None and tuple(get("corruptions")) != spec.CORRUPTIONS:
        parts.append(f"--corruptions={','.join(get('corruptions'))}")
    if get("severities") is not None and tuple(get("severities")) != spec.SEVERITIES:
        parts.append(f"--severities={','.join(map(str, get('severities')))}")
    if get("image_size") is not None:
        parts.append(f"--image-size={get('image_size')}")
    if get("seed", spec.DEFAULT_SEED) != spec.DEFAULT_SEED:
        parts.append(f"--seed={get('seed')}")
    if get("vsi_support") not in (None, spec.VSI_SUPPORT):
        parts.append(f"--vsi-support={get('vsi_support')}")
    where = get("thresholds_dir")
    if where is not None and Path(where).resolve() != (Path.cwd() / "thresholds").resolve():
        parts.append(f"--thresholds-dir={where}")
    parts.append("--snapshot-update")
    return shlex.join(parts)
