"""One case, baseline against current: the gate pipeline the live suite and the offline report
both run, so a case is comparable, checked and counted by the same rules in either.

:func:`check_case` decides comparability (:data:`SETTINGS_KEYS`), checks the snapshot's rules
and calls the one decision, :func:`benchc.gates.check`; :func:`record_command` is the one
command that re-records a model's thresholds.
"""

from __future__ import annotations

import json
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
    return info_mismatch(baseline.info, current.info)


def info_mismatch(recorded: Mapping[str, Any], current: Mapping[str, Any]) -> list[tuple]:
    """:func:`settings_mismatch` of two payloads' ``info`` (a snapshot read as plain JSON)."""
    return [(k, recorded.get(k), current.get(k)) for k in SETTINGS_KEYS
            if recorded.get(k) != current.get(k)]  # fmt: skip


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


#: The settings every printed command carries (the suite's option names, ``--image-size``...):
#: all that decide whether a run is comparable with its baseline, and where it reads and
#: writes, so a printed command run verbatim continues this run instead of starting another.
RECORD_SETTINGS = (
    "model", "model_args", "revision", "dtype", "dataset", "dataset_args", "vsi_dataset",
    "corruptions",
    "severities", "image_size", "seed", "vsi_support", "region_locator", "limit", "lenient",
    "allow_outside_root", "results_dir", "cache_dir", "thresholds_dir", "baseline", "degrade",
)  # fmt: skip


def _args_text(args: Mapping[str, Any]) -> str:
    """``--model-args`` as given: ``k=v,...`` (a JSON object for ``extra_body``)."""
    return ",".join(
        f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}" for k, v in args.items()
    )


def _default_dir(value: Any, default: str) -> bool:
    return Path(value).resolve() == (Path.cwd() / default).resolve()


def suite_args() -> list[str]:
    """How to name the suite from the working directory: this checkout's folder, else the
    installed package (``--pyargs``), so a printed command runs where the run ran."""
    if (Path.cwd() / "benchc_tests" / "suite").is_dir():
        return ["benchc_tests/suite"]
    return ["--pyargs", "benchc_tests.suite"]


def suite_command(
    settings: Mapping[str, Any],
    *,
    defaults: Mapping[str, str] | None = None,
    update: bool = False,
    extra: tuple[str, ...] = (),
) -> str:
    """The suite command of :data:`RECORD_SETTINGS` (``--snapshot-update`` when ``update``,
    then ``extra``); a setting at its default (missing, None, or the value in ``defaults``) is
    left out."""
    get, defaults = settings.get, defaults or {}
    parts = ["pytest", *suite_args()]
    for key in ("model", "dataset", "vsi_dataset"):
        if get(key) and get(key) != defaults.get(key):
            parts.append(f"--{key.replace('_', '-')}={get(key)}")
    if get("dataset_args"):
        parts.append(
            "--dataset-args=" + ",".join(f"{k}={v}" for k, v in get("dataset_args").items())
        )
    if get("model_args"):
        parts.append(f"--model-args={_args_text(get('model_args'))}")
    for key in ("revision", "dtype", "image_size", "limit", "region_locator", "baseline"):
        if get(key) is not None and not (key == "region_locator" and get(key) == "none"):
            parts.append(f"--{key.replace('_', '-')}={get(key)}")
    if get("corruptions") is not None and tuple(get("corruptions")) != spec.CORRUPTIONS:
        parts.append(f"--corruptions={','.join(get('corruptions'))}")
    if get("severities") is not None and tuple(get("severities")) != spec.SEVERITIES:
        parts.append(f"--severities={','.join(map(str, get('severities')))}")
    if get("seed", spec.DEFAULT_SEED) != spec.DEFAULT_SEED:
        parts.append(f"--seed={get('seed')}")
    if get("vsi_support") not in (None, spec.VSI_SUPPORT):
        parts.append(f"--vsi-support={get('vsi_support')}")
    for key in ("lenient", "allow_outside_root"):
        if get(key):
            parts.append(f"--{key.replace('_', '-')}")
    for key, default in (("results_dir", ".benchc/results"), ("thresholds_dir", "thresholds")):
        if get(key) is not None and not _default_dir(get(key), default):
            parts.append(f"--{key.replace('_', '-')}={get(key)}")
    if get("cache_dir") is not None:
        parts.append(f"--cache-dir={get('cache_dir')}")
    if get("degrade"):
        knobs = ",".join(f"{k}={v:g}" for k, v in get("degrade").items())
        parts.append(f"--benchc-degrade={knobs}")
    if update:
        parts.append("--snapshot-update")
    parts.extend(extra)
    return shlex.join(parts)


def record_command(
    settings: Mapping[str, Any], *, defaults: Mapping[str, str] | None = None
) -> str:
    """The one command that records a baseline from :data:`RECORD_SETTINGS`."""
    return suite_command(settings, defaults=defaults, update=True)
