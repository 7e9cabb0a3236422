"""What the suite tells a user whose run cannot be gated: one message per run, with commands.

Every command printed here is built by :func:`command` from the run's own configuration, so it
carries every setting that decides comparability (dataset, VSI set, image size, seed, grid, VSI
support, output-changing model arguments, the baseline's name) and where the run reads and
writes (results, thresholds): run verbatim, it continues this run instead of starting another.
A gate run never suggests recording the candidate as its own baseline; it shows how to record
one from the released checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchc.fsutil import display_path
from benchc.gates.baselines import BaselineRef, available
from benchc.suite.config import SuiteConfig
from benchc.suite.options import OPTIONS, suite_command

#: Stands for the released checkpoint where benchc cannot know it.
RELEASED = "<released checkpoint>"
#: A setting of the baseline that benchc cannot know (no command is printed with it).
UNKNOWN = object()


def command(
    cfg: SuiteConfig, *, update: bool = False, extra: Sequence[str] = (), **overrides: Any
) -> str:
    """This run's suite command (``overrides``: option fields set otherwise). A gate run's
    command also keeps how the run gates (:func:`gate_policy`), so a printed fix gates as
    strictly as the run that printed it."""
    if update and "limit" not in overrides:
        overrides["limit"] = None  # a baseline is recorded on the whole dataset
    cfg = replace(cfg, **overrides)
    settings = {o.field: getattr(cfg, o.field) for o in OPTIONS}
    return suite_command(settings, update=update, policy=not update, extra=tuple(extra))


def gate_policy(cfg: SuiteConfig) -> list[str]:
    """The options of ``cfg`` that decide how a gate run gates and exits, where not their
    defaults (:attr:`benchc.suite.options.Option.policy`: the sequential look, the false-alarm
    budget, ``--strict-gates``, ``--inconclusive``)."""
    return [arg for o in OPTIONS if o.policy for arg in o.to_args(getattr(cfg, o.field))]


def record_release(cfg: SuiteConfig, ref: BaselineRef, model: str | None = None) -> str:
    """The command that records baseline ``ref`` from the released checkpoint ``model``: the
    release's own run, so never in the candidate's ``--results-dir`` (the default folder)."""
    baseline = ref.given if ref.given is not None else ref.name
    model = model or RELEASED
    own = {} if model == cfg.model else {"results_dir": None}
    return command(cfg, update=True, model=model, baseline=baseline, **own)


def recorded_elsewhere(cfg: SuiteConfig, ref: BaselineRef) -> list[tuple[str, str]]:
    """``(--baseline value, where it lies)`` of every baseline benchc recorded in the run's
    ``--thresholds-dir`` (by name) and, for a ``--baseline`` given as a path, beside it (by
    path): each value gates this run as it stands (:func:`benchc.gates.baselines.available`)."""
    out: list[tuple[str, str]] = []
    seen: set[Path] = set()
    thresholds = Path(cfg.thresholds_dir)
    for name in available(thresholds):
        seen.add((thresholds / name).resolve())
        out.append((name, display_path(thresholds)))
    if ref.given is not None and Path(ref.given).is_absolute():
        parent = ref.folder.parent
        for name in available(parent):
            if (parent / name).resolve() not in seen:
                out.append((str(parent / name), display_path(parent)))
    return out


def missing_baseline(cfg: SuiteConfig, ref: BaselineRef, model_name: str) -> str:
    """No snapshot in the baseline's folder: where benchc looked, the baselines that exist (in
    ``--thresholds-dir``, and beside a ``--baseline`` path), and commands that work as printed
    (``<released checkpoint>``/``<release name>``: the one thing benchc cannot know)."""
    how = (
        f"--baseline {ref.given}"
        if ref.given is not None
        else f"no --baseline given, so the model's own name '{ref.name}'"
    )
    where = "the folder does not exist; " if not ref.folder.exists() else ""
    there = recorded_elsewhere(cfg, ref)
    by_place: dict[str, list[str]] = {}
    for value, place in there:
        by_place.setdefault(place, []).append(Path(value).name)
    listed = "; ".join(f"in {place}: {', '.join(names)}" for place, names in by_place.items())
    lines = [
        f"no baseline '{ref.name}' to gate model '{model_name}' against: no threshold "
        f"snapshot in {ref.source}/ ({where}{how}).",
        "baselines recorded " + (listed or f"in {display_path(cfg.thresholds_dir)}: none"),
        "fixes, in order:",
    ]
    n = 1
    for value, _ in there[:3]:
        lines.append(f"  {n}. gate against the recorded baseline '{Path(value).name}':")
        lines.append(f"       {command(cfg, baseline=value)}")
        n += 1
    release = "<release name>" if ref.given is None else ref.given
    fill = f"{RELEASED} and <release name>" if ref.given is None else RELEASED
    into = f"{display_path(cfg.thresholds_dir)}/<release name>" if ref.given is None else ref.source
    lines.append(
        f"  {n}. record the released checkpoint's baseline once (fill in {fill}; it is "
        f"written to {into}/, commit it), then gate with --baseline={release}:"
    )
    lines.append(f"       {command(cfg, update=True, model=RELEASED, baseline=release)}")
    if ref.given is None and not there:  # a first recording: this model may be the release
        lines.append(
            f"  {n + 1}. only if '{model_name}' itself is the release future candidates are "
            "gated against, record it:"
        )
        lines.append(f"       {command(cfg, update=True)}")
    return "\n".join(lines)


def not_comparable(
    cfg: SuiteConfig,
    ref: BaselineRef,
    problems: Sequence[tuple[str, str, dict[str, Any]]],
    recorded_model: str | None,
) -> str:
    """Settings that differ from the baseline's: ``(option, "recorded X, this run Y",
    the fields that would match it)`` each, then the fixes, the likelier first."""
    lines = [f"this run cannot be gated against baseline {ref.label}:"]
    lines += [f"  {option}: {text}" for option, text, _ in problems]
    fixes: dict[str, Any] = {}
    for _, _, fix in problems:
        fixes.update(fix)
    lines.append("fixes, in order:")
    n = 1
    if fixes and not any(v is UNKNOWN for v in fixes.values()):
        lines.append(f"  {n}. run with the baseline's settings:")
        lines.append(f"       {command(cfg, **fixes)}")
        n += 1
    model = cfg.model if ref.given is None else recorded_model
    lines.append(
        f"  {n}. if the new settings are intended, re-record baseline '{ref.name}' from the "
        "released checkpoint under them, then rerun:"
    )
    lines.append(f"       {record_release(cfg, ref, model)}")
    return "\n".join(lines)


__all__ = [
    "RELEASED",
    "UNKNOWN",
    "command",
    "gate_policy",
    "missing_baseline",
    "not_comparable",
    "record_release",
]
