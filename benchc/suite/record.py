"""``--snapshot-update``: one case's snapshot written into its baseline.

The engine names the file (:meth:`benchc.gates.baselines.BaselineRef.snapshot`: after the gate,
not the pytest test); syrupy writes it. Rules edited by hand in the old snapshot are merged, the
evidence goes to its sidecar, a grid-level snapshot recorded over more cells than this run
selects is kept, and a snapshot whose rules cannot be read is never replaced (its hand edits
would be lost silently). A file recorded under the pytest test's name is replaced by the
gate-named one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from benchc.gates import Payload, pipeline, sidecar
from benchc.gates.baselines import snapshot_stem
from benchc.gates.engine import SnapshotUnusable, identity, load_snapshot
from benchc.gates.recording import recorded_records
from benchc.gates.rules import RuleError, check_rules, default_rules, merge_rules

if TYPE_CHECKING:
    from benchc.gates.engine import GateEngine


def _unusable_header(path: Path) -> dict[str, Any] | None:
    """The ``info`` of a snapshot that exists but cannot be loaded (its evidence is damaged or
    missing), when its header is this benchc's; a ``pytest.fail`` when its rules cannot be
    read. None: no such file, or not a snapshot of this format (re-recording it is the fix)."""
    from benchc.gates.payload import FORMAT
    from benchc.gates.rules import parse_rule

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("benchc_snapshot") != FORMAT:
        return None
    problem = None
    try:
        for rule in data.get("rules") or ():
            parse_rule(rule)
    except (RuleError, TypeError, ValueError) as exc:
        problem = str(exc)
    if problem is not None:  # failed outside the handler: one message, no chained traceback
        pytest.fail(
            f"{path}: a gate rule cannot be read ({problem}); nothing was recorded for this "
            "case: fix the rule (or delete it for the default) and record again",
            pytrace=False,
        )
    info = data.get("info")
    return info if isinstance(info, dict) else {}


def _kept(case: str, payload: Payload, header: dict[str, Any], usable: bool) -> dict | None:
    """The record of a grid-level snapshot this subset run must not overwrite (None: write)."""
    if payload.level not in ("model", "family"):
        return None
    old = set(header.get(pipeline.GRID_KEY) or ())
    new = set(payload.info.get(pipeline.GRID_KEY) or ())
    if pipeline.info_mismatch(header, payload.info) or old <= new:
        return None
    unusable = "" if usable else " (it is unusable: record all its cells)"
    return {"case": case, "scope": payload.scope, "level": payload.level, "status": "kept",
            "reason": f"recorded over {len(old)} cells, this run selects {len(new)}: a subset "
            f"run never overwrites it{unusable}"}  # fmt: skip


def _rules(payload: Payload, baseline: Payload | None, path: Path):
    rules = default_rules(payload.level)
    if baseline is not None:
        try:
            check_rules(baseline.rules, baseline.level, where=str(path))
        except RuleError as exc:
            pytest.fail(str(exc), pytrace=False)
        rules = merge_rules(baseline.rules, payload.level)
    names = set(payload.figures)
    return tuple(r for r in rules if r.figure in names)


def record_case(
    engine: GateEngine, snapshot: Any, case: str, payload: Payload
) -> list[dict[str, Any]]:
    """Write ``payload`` as case ``case``'s snapshot into the engine's baseline (``snapshot``:
    the case's syrupy assertion); the records the summary's recording block reads (the
    ``kept`` one when a larger grid's snapshot stays)."""
    from benchc.suite.payloads import with_rules

    path = engine.snapshot_path(payload)
    try:
        baseline = load_snapshot(path)
    except SnapshotUnusable:
        baseline = None
    header = baseline.info if baseline is not None else _unusable_header(path)
    if header is not None:
        kept = _kept(case, payload, header, baseline is not None)
        if kept is not None:
            return [kept]
    rules = _rules(payload, baseline, path)
    payload = with_rules(payload, rules, z_for=engine.budget.z, seed=engine.seed)
    if payload.evidence is not None:
        sidecar.save(path.parent, payload.evidence)
    stem = snapshot_stem(*identity(payload))
    assert snapshot(name=stem) == payload
    written = path.parent / f"{stem}.json"
    legacy = engine.baseline.legacy_snapshot(*identity(payload))
    if legacy.is_file() and legacy != written:
        legacy.unlink()  # the gate-named file replaces the test-named one
    return recorded_records(case, payload, written, z_for=engine.budget.z, seed=engine.seed)


__all__ = ["record_case"]
