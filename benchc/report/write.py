"""Writing ``report.html`` and ``report.json`` for one run (against its baseline) or several.

Used by ``pytest --report DIR`` at session end (with the gate verdicts that run produced) and by
``benchc report`` / ``benchc compare`` from stored runs at any later time.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchc import provenance, spec
from benchc.fsutil import display_path
from benchc.gates.engine import run_verdict
from benchc.gates.facts import Facts, run_facts
from benchc.gates.snapshot import recorded_vsi_support
from benchc.gates.states import DEFAULT_POLICY, Policy
from benchc.gates.verdict import Overall
from benchc.report import agreement, data, drill, page, plots
from benchc.report import baseline as snap
from benchc.report.compare import CompareError, paired, shared
from benchc.report.vsi import vsi_by_id
from benchc.results.facts import NO_FACTS, SuiteFacts
from benchc.results.reader import StoredRun, read_run
from benchc.results.store import StoreError, atomic_write_text

HTML = "report.html"
JSON = "report.json"
NO_VERDICTS = "no gate verdicts available"


def offline_verdicts(
    run_dir: Path, folder: Path, vsi_dir: Path | None = None, facts: SuiteFacts = NO_FACTS
) -> tuple[list[dict] | None, str]:
    """The gates' verdicts for a stored run (and its VSI run) against the baseline ``folder``,
    from the gates' own code when the suite offers it (``facts.verdicts``)."""
    collect = facts.verdicts
    if collect is None:
        return None, f"{NO_VERDICTS}: this benchc cannot re-check gates offline"
    return list(
        collect(Path(run_dir), Path(folder).parent, vsi_dir=vsi_dir, baseline_folder=Path(folder))
    ), f"gates checked against baseline {Path(folder).name} ({display_path(folder)})"


def baseline_folder_for(run: StoredRun, baseline: Path) -> Path:
    """``--baseline DIR`` of ``benchc report``: a baseline folder itself (it holds snapshots),
    else a thresholds folder holding one named after the run's model."""
    from benchc.gates.baselines import locate

    return locate(Path(baseline), run.model_name).folder


def record_command_for(
    run: StoredRun,
    thresholds_dir: Path | None = None,
    folder: Path | None = None,
    vsi_dir: Path | None = None,
    *,
    release: bool = True,
    facts: SuiteFacts = NO_FACTS,
) -> str | None:
    """The command that re-records this run's baseline (``release``: from the released
    checkpoint its manifest names; else from this run's own model): the gates' one builder
    (``facts.record_command``, :func:`benchc.suite.gate.run_record_command`) on the run's
    manifest; None where the suite offers none."""
    run_record_command = facts.record_command
    if run_record_command is None:
        return None
    vsi = None
    if vsi_dir is not None:
        from benchc.results.store import read_manifest

        vsi = read_manifest(Path(vsi_dir)).get("dataset_spec")
    return run_record_command(
        run, thresholds_dir, baseline_folder=folder, vsi_dataset=vsi, release=release
    )


def _write(doc: dict[str, Any], out_dir: Path, drill_note: str | None) -> Path:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    svgs = plots.render_all(doc)
    atomic_write_text(out_dir / HTML, page.render(doc, svgs, drill_note=drill_note))
    public = copy.deepcopy(doc)
    for item in public.get("drilldown", []):
        item.pop("thumbnails", None)
    public["figures"] = sorted(svgs)
    atomic_write_text(
        out_dir / JSON, json.dumps(public, indent=1, sort_keys=True, allow_nan=False) + "\n"
    )
    for name in (HTML, JSON):  # an artifact others read: not the temporary file's 0600
        os.chmod(out_dir / name, 0o644)
    return out_dir / HTML


def _vsi_pair(
    run: StoredRun,
    base: snap.SnapshotBaseline | None,
    base_run: StoredRun | None,
    support: str,
) -> tuple[dict[str, float], dict[str, float]] | None:
    """(baseline, current) per-sample VSI on the gated support, for drill-down cards."""
    current = vsi_by_id(run, support)
    if not current:
        return None
    baseline = vsi_by_id(base_run, support)
    if not baseline and base is not None and not base.empty:
        ev = snap.baseline_vsi_evidence(base)
        if ev is not None:
            baseline = dict(zip(ev.ids, ev.vsi.tolist(), strict=True))
    return baseline, current


def write_report(
    run_dir: Path,
    out_dir: Path,
    *,
    thresholds_dir: Path | None = None,
    verdicts: Sequence[dict[str, Any]] | None = None,
    verdict_note: str | None = None,
    record_command: str | None = None,
    accept_command: str | None = None,
    images: bool = True,
    n_boot: int = data.N_BOOT,
    vsi_dir: Path | None = None,
    vsi_support: str | None = None,
    baseline_folder: Path | None = None,
    notes: Sequence[str] | None = None,
    overall: Overall | None = None,
    session: dict[str, Any] | None = None,
    facts: SuiteFacts = NO_FACTS,
    policy: Policy = DEFAULT_POLICY,
    changes: dict[str, Any] | None = None,
) -> Path:
    """Write ``out_dir/report.html`` and ``report.json`` for one stored run against its baseline
    (``baseline_folder``, else the one named after the run's model in ``thresholds_dir``).

    ``verdicts``: this run's gate records (None with a baseline: re-checked offline by the
    gate engine); ``overall``: the run's verdict as the engine decided it (None: decided here
    under ``policy``); ``notes``: the run notes the terminal printed (None: ``facts.notes``);
    ``vsi_dir``: the VSI gates' own run folder; ``session``: the suite run writing it.
    ``changes``: the run's "changed since baseline" (:mod:`benchc.gates.changes`; None: the
    stored run's model folder against the baseline's recorded identity).
    """
    run = _read(run_dir, vsi_dir)
    # the whole run's notes, as the terminal printed them (before any like-for-like subset)
    notes = list(notes) if notes is not None else facts.notes(run)
    folder, vsi_support, base, base_run = _baseline_of(
        run, thresholds_dir, baseline_folder, vsi_support
    )
    if verdicts is None:
        verdicts, verdict_note = _offline(run, folder, verdict_note, vsi_dir, facts)
    # like for like: every table and figure on what the gates compared (report.json ``subset``)
    run, base_run, subset = data.like_for_like(run, base, base_run)
    if overall is None and verdicts is not None:
        overall = run_verdict(verdicts, facts=run_facts(run, base_run), policy=policy)
    items, note = _cards(run, verdicts, base, base_run, images, vsi_support)
    record_command = record_command or record_command_for(run, thresholds_dir, folder, vsi_dir,
                                                          facts=facts)  # fmt: skip
    accept_command = accept_command or record_command_for(run, thresholds_dir, folder, vsi_dir,
                                                          release=False, facts=facts)  # fmt: skip
    doc = data.build(
        [run], baseline=base, baseline_run=base_run, verdicts=verdicts,
        verdict_note=verdict_note, record_command=record_command,
        accept_command=accept_command, drilldown=items,
        n_boot=n_boot, vsi_support=vsi_support, subset=subset,
        overall=overall.to_dict() if overall is not None else None,
        provenance=provenance.provenance(
            run.manifest, _baseline_manifest(folder) if folder is not None else None, session
        ),
    )  # fmt: skip
    _add_context(doc, folder, run, notes, changes)
    return _write(doc, out_dir, note)


def _add_context(
    doc: dict[str, Any],
    folder: Path | None,
    run: StoredRun,
    notes: list[str],
    changes: dict[str, Any] | None,
) -> None:
    """What the page says beside the figures: the environment the baseline was recorded in,
    the run's notes, and what changed since the baseline."""
    if folder is not None:
        doc["baseline_note"] += environment_note(folder, run)
    doc["notes"] = notes
    doc["changes"] = changes if changes is not None else _offline_changes(folder, run)


def _offline(
    run: StoredRun, folder: Path | None, note: str | None, vsi_dir: Path | None, facts: SuiteFacts
) -> tuple[list[dict] | None, str | None]:
    """The gate records of a stored run without its session's: the engine's offline check
    against ``folder``, or none (and why) without a baseline."""
    if folder is not None:
        return offline_verdicts(run.path, folder, vsi_dir, facts)
    return None, note or f"{NO_VERDICTS} (no --baseline thresholds given)"


def _baseline_of(
    run: StoredRun, thresholds_dir: Path | None, folder: Path | None, vsi_support: str | None
) -> tuple[Path | None, str, snap.SnapshotBaseline | None, StoredRun | None]:
    """The baseline a report overlays: its folder (given, else the one named after the run's
    model), the VSI support its snapshots were recorded with, its snapshots and their run."""
    if folder is None and thresholds_dir is not None:
        folder = baseline_folder_for(run, Path(thresholds_dir))
    if vsi_support is None:
        vsi_support = recorded_vsi_support(folder) if folder is not None else spec.VSI_SUPPORT
    base = snap.read_folder(folder) if folder is not None else None
    base_run = snap.evidence_run(base) if base is not None and not base.empty else None
    return folder, vsi_support, base, base_run


def _cards(
    run: StoredRun,
    verdicts: Sequence[dict[str, Any]] | None,
    base: snap.SnapshotBaseline | None,
    base_run: StoredRun | None,
    images: bool,
    vsi_support: str,
) -> tuple[list[dict[str, Any]], str | None]:
    """The drill-down cards: the samples the verdicts and the baseline single out."""
    picks = drill.pick_samples(run, verdicts=verdicts, other=base_run, other_label="the baseline")
    return drill.drilldown(
        run,
        picks,
        baseline_ras=drill.mean_ras_by_id(base_run, run),
        images=images,
        vsi=_vsi_pair(run, base, base_run, vsi_support),
        other=base_run,
    )


def run_facts_for(run_dir: Path, folder: Path | None, vsi_dir: Path | None = None) -> Facts:
    """The facts the verdict weighs (:func:`benchc.gates.facts.run_facts`) of a stored run
    against the baseline ``folder``, drawn like for like as the report draws it."""
    run = _read(run_dir, vsi_dir)
    base = snap.read_folder(folder) if folder is not None else None
    base_run = snap.evidence_run(base) if base is not None and not base.empty else None
    run, base_run, _ = data.like_for_like(run, base, base_run)
    return run_facts(run, base_run)


def _read(run_dir: Path, vsi_dir: Path | None) -> StoredRun:
    """A stored run; any failure to read it is a :class:`StoreError` naming the folder (a
    damaged or foreign store), so a later error is never mistaken for one."""
    try:
        return read_run(run_dir, vsi_dir=vsi_dir)
    except StoreError:
        raise
    except ValueError as exc:
        raise StoreError(f"{display_path(run_dir)}: {exc}") from exc


def _baseline_manifest(folder: Path) -> dict[str, Any] | None:
    """The baseline's recorded manifest (model, dataset, environment) as provenance."""
    from benchc.gates.baselines import read_manifest

    meta = read_manifest(folder)
    meta.pop("identity", None)  # the checkpoint's files and configs: report.json ``changes``
    return {"folder": display_path(folder), **meta} if meta else None


def _offline_changes(folder: Path | None, run: StoredRun) -> dict[str, Any] | None:
    from benchc.gates.baselines import read_manifest
    from benchc.gates.changes import offline_changes

    manifest = read_manifest(folder) if folder is not None else {}
    return offline_changes(manifest, run.manifest.get("model_spec"))


def environment_note(folder: Path, run: StoredRun) -> str:
    """``"; recorded in another environment: torch 2.12.0 -> 2.13.0"`` or ``""``."""
    from benchc import provenance
    from benchc.gates.baselines import read_manifest

    was, now = read_manifest(folder).get("environment"), run.manifest.get("environment")
    diff = provenance.differences(was, now) if now else []
    return f"; recorded in another environment: {', '.join(diff)}" if diff else ""


def compare_runs(
    run_dirs: Sequence[Path],
    out_dir: Path,
    *,
    labels: Sequence[str] | None = None,
    images: bool = True,
    n_boot: int = data.N_BOOT,
    vsi_dirs: Sequence[Path | None] | None = None,
    n_permutations: int = agreement.PERMUTATION_RESAMPLES,
    facts: SuiteFacts = NO_FACTS,
) -> Path:
    """The same page for two or more stored runs side by side (the first sets the grid), with
    their cross-run agreement (:mod:`benchc.report.agreement`; ``n_permutations``: the VSI
    permutation test's shuffles, the paper's 10^5 unless a test asks for fewer)."""
    if len(run_dirs) < 2:
        raise CompareError(f"compare needs at least two runs, got {len(run_dirs)}")
    vsi_dirs = list(vsi_dirs) if vsi_dirs is not None else [None] * len(run_dirs)
    if len(vsi_dirs) != len(run_dirs):
        raise CompareError(f"{len(vsi_dirs)} VSI folders for {len(run_dirs)} runs")
    if labels is not None and len(labels) != len(run_dirs):
        raise CompareError(f"{len(labels)} labels for {len(run_dirs)} runs")
    runs = [_read(p, v) for p, v in zip(run_dirs, vsi_dirs, strict=True)]
    notes = [facts.notes(r) for r in runs]  # each whole run's, before the shared subset
    # the runs on what they all have (cells, samples), what was left out said on the page
    common = shared(runs, list(labels) if labels else data.default_labels(runs))
    runs = common.runs
    # the cards: the second run's samples that moved most against the first (the baseline of
    # every difference), the first run's answer beside the second's
    names = list(labels) if labels else data.default_labels(runs)
    picks = drill.pick_samples(runs[1], other=runs[0], other_label=names[0])
    items, note = drill.drilldown(
        runs[1], picks, images=images, other=runs[0], labels=(names[1], names[0])
    )
    doc = data.build(
        runs,
        labels=labels,
        verdict_note="runs compared side by side: no gates are checked",
        drilldown=items,
        n_boot=n_boot,
    )
    doc["compare"] = common.block()
    labels = [sr["label"] for sr in doc["series"][: len(runs)]]
    doc["notes"] = [f"{lab}: {n}" for lab, ns in zip(labels, notes, strict=True) for n in ns]
    doc["compare"]["paired"] = paired(runs, labels)
    doc["agreement"] = agreement.block(runs, labels, n_resamples=n_permutations)
    return _write(doc, out_dir, note)
