"""Report data: every number the page draws, as one JSON-able document (``report.json``).

The figures and the page are pure functions of this document, so what a figure plots is
exactly what ``report.json`` holds, and tests check that against :mod:`benchc.metrics`.
Schema (``SCHEMA``; bump the number on any incompatible change):

``series``: list of one entry per run or baseline (first = the run under report), each with
``label``, ``kind`` (``run`` | ``baseline``), ``model``, ``dataset``, ``n``, ``source`` (the
folder as :func:`benchc.fsutil.display_path` shows it: relative inside the working directory)
and the blocks ``table2`` ({figure: {value, se}}), ``cells`` ({figure: {cell key: value}}),
``states`` (Table III), ``plane`` (Fig. 5), ``regimes`` (Table IV), ``trajectories`` (Fig. 6),
``families`` (Fig. 7: {figure: {family: [value per severity]}}), ``vsi`` (VSI Fig. 1, Fig. 2 /
Table 2 and the error signals), ``accuracy_by_position`` (option order, docs/spec.md §4:
``positions``, ``clean`` and ``corrupted`` accuracy by the position the correct option was
shown at, :mod:`benchc.report.position`); a block a series cannot supply is ``null``.
``axes``: ``corruptions``, ``severities``, ``families``. ``verdicts``: ``available``, ``note``,
``items`` (the gate verdict dicts, failures first), ``counts``, ``record_command`` (re-records
the baseline from the released checkpoint) and ``accept_command`` (records this candidate as
the baseline; null when that is the same command).
``sides`` (a run against its baseline): ``candidate`` and ``baseline``, each ``name`` and
``source``; the run's series is labelled ``candidate: ...``, the baseline's ``baseline`` with
its ``name``.
``drilldown``: the samples that moved most. A compare page adds ``agreement``
(:mod:`benchc.report.agreement`: ``vsi`` rank agreement, Bench-C ``table_vi`` and ``table_v``).
Undefined numbers are ``null``, never 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchc import spec
from benchc.fsutil import display_path
from benchc.gates.evidence import VSIEvidence
from benchc.gates.verdict import verdict_anchor
from benchc.metrics import (
    REGIMES,
    STATES,
    TRAJECTORIES,
    GridMetrics,
)
from benchc.metrics.figures import reported_cells, table2_figures
from benchc.report import baseline as snap
from benchc.report.compare import CompareError, restrict, shared
from benchc.report.position import position_accuracy
from benchc.report.vsi import run_evidence, vsi_block
from benchc.results.reader import StoredRun

SCHEMA = "benchc-report/1"
#: Bootstrap replicates for the Table II standard errors (seed = the run's seed).
N_BOOT = 1000


#: Fig. 5 density grid: ΔS and ΔC both in [-1, 1].
PLANE_BINS = 24
#: Gate status order on the page: what needs action first.
STATUS_ORDER = {"fail": 0, "improved": 1, "unchecked": 2, "pass": 3}
#: Within a status, the broadest gates first: a model-level failure outranks a cell's.
LEVEL_ORDER = {"model": 0, "vsi": 1, "family": 2, "cell": 3}
#: Samples in the drill-down.
DRILL_SAMPLES = 6


def num(x: Any) -> float | None:
    """A finite float, or None (JSON null) for NaN, inf and missing."""
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def nums(a: Any) -> list:
    """A nested list of :func:`num` values."""
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim == 0:
        return num(arr)  # type: ignore[return-value]
    return [nums(x) for x in arr]


def _nanmean(a: np.ndarray) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.nanmean(a)) if np.size(a) else float("nan")


# -- one run -> one series ---------------------------------------------------------------------
def table2(g: GridMetrics, seed: int, n_boot: int = N_BOOT) -> dict[str, dict[str, float | None]]:
    """Table II: model-level figures with bootstrap SEs over samples."""
    ses = g.standard_errors(n_boot, seed)
    return {
        f.key: {"value": num(g.figure(f.name)), "se": num(ses.get(f.name))}
        for f in table2_figures()
    }


def cells(g: GridMetrics, severities: Sequence[int]) -> dict[str, dict[str, float | None]]:
    """Per cell figure, ``{cell key: value}``."""
    out: dict[str, dict[str, float | None]] = {}
    for f in reported_cells():
        arr = g.cell(f.name)
        out[f.name] = {
            spec.condition_key(c, s): num(arr[i, j])
            for i, c in enumerate(g.corruptions)
            for j, s in enumerate(severities)
        }
    return out


def states(g: GridMetrics) -> dict[str, Any]:
    """Table III: share over all pairs, conditional rate (alpha), source weights (pi) and the
    state-conditioned means of RAS, ΔS, ΔC (Eqs. 12-16 pooled over every valid pair)."""
    ras_att, ds_att, dc_att = g.states("ras"), g.states("d_s"), g.states("d_c")
    total = float(ras_att.count.sum())
    return {
        "states": list(STATES),
        "count": [int(x) for x in ras_att.count],
        "share": [num(c / total) if total else None for c in ras_att.count],
        "cond_rate": nums(ras_att.alpha),
        "d_acc": [0, -1, 1, 0],
        "ras": nums(ras_att.mean),
        "d_s": nums(ds_att.mean),
        "d_c": nums(dc_att.mean),
        "pi": nums(ras_att.pi),
        "r_c": num(ras_att.source[0]),
        "r_w": num(ras_att.source[1]),
    }


def plane(g: GridMetrics) -> dict[str, Any]:
    """Fig. 5: per correctness state, a (ΔS, ΔC) density and the state's mean ΔS, ΔC, RAS."""
    codes = np.broadcast_to(
        np.where(g.correct_clean, 0, 2)[:, None, None], g.valid.shape
    ) + np.where(g.correct, 0, 1)
    edges = np.linspace(-1.0, 1.0, PLANE_BINS + 1)
    out: dict[str, Any] = {"edges": nums(edges), "states": {}}
    for k, name in enumerate(STATES):
        m = g.valid & (codes == k)
        ds, dc, r = g.d_s[m], g.d_c[m], g.ras[m]
        hist, _, _ = np.histogram2d(np.clip(ds, -1, 1), np.clip(dc, -1, 1), bins=[edges, edges])
        out["states"][name] = {
            "n": int(m.sum()),
            "mean_d_s": num(_nanmean(ds)),
            "mean_d_c": num(_nanmean(dc)),
            "mean_ras": num(_nanmean(r)),
            "density": [[int(v) for v in row] for row in hist],  # [ΔS bin][ΔC bin]
        }
    return out


def regimes(g: GridMetrics) -> dict[str, Any]:
    """Table IV: sign regimes of (ΔC, ΔS) over valid pairs."""
    t = g.regimes()
    return {
        "regimes": list(REGIMES),
        "mean_d_c": nums(t.mean_dc),
        "mean_d_s": nums(t.mean_ds),
        "mean_ras": nums(t.mean_ras),
        "share": nums(t.share),
        "count": [int(x) for x in t.count],
    }


def trajectories(g: GridMetrics) -> dict[str, Any] | None:
    """Fig. 6: trajectory class composition and class-conditioned RAS (needs >= 2 severities)."""
    if g.shape[2] < 2:
        return None
    t = g.trajectories()
    return {
        "classes": list(TRAJECTORIES),
        "count": [int(x) for x in t.count],
        "share": nums(t.share),
        "ras": nums(t.ras),
        "d_s": nums(t.d_s),
        "d_c": nums(t.d_c),
    }


def families(
    cell_values: dict[str, dict[str, float | None]],
    corruptions: Sequence[str],
    severities: Sequence[int],
) -> dict[str, dict[str, list[float | None]]]:
    """Fig. 7: per figure and family, the mean over the family's corruptions at each severity
    (ordinary arithmetic means, as Bench-C)."""
    out: dict[str, dict[str, list[float | None]]] = {}
    for fig in ("ras", "r_c", "r_w", "accuracy"):
        vals = cell_values.get(fig, {})
        out[fig] = {}
        for fam, members in spec.FAMILIES.items():
            cs = [c for c in corruptions if c in members]
            if not cs:
                continue
            row = []
            for s in severities:
                got = [vals.get(spec.condition_key(c, s)) for c in cs]
                got = [v for v in got if v is not None]
                row.append(num(np.mean(got)) if len(got) == len(cs) else None)
            out[fig][fam] = row
    return out


def _meta(run: StoredRun, label: str) -> dict[str, Any]:
    return {
        "label": label,
        "kind": "run",
        "model": run.model_name,
        "dataset": run.dataset_name,
        "n": len(run.ids),
        "source": display_path(run.path),
        "model_fingerprint": run.manifest.get("model_fingerprint"),
        "dataset_fingerprint": run.manifest.get("dataset_fingerprint"),
    }


def series_from_run(
    run: StoredRun,
    label: str,
    *,
    n_boot: int = N_BOOT,
    vsi_ref: VSIEvidence | None = None,
    vsi_support: str = spec.VSI_SUPPORT,
) -> dict[str, Any]:
    """Every block of one stored run; ``vsi_ref``: the evidence whose low-VSI pool its VSI
    Table 2 is read on, ``vsi_support`` the VSI the gates read (docs/spec.md §5)."""
    g = run.grid
    out = _meta(run, label)
    if g is None:
        out.update(table2=None, cells=None, states=None, plane=None, regimes=None)
        out.update(trajectories=None, families=None)
    else:
        cv = cells(g, run.severities)
        out.update(
            table2=table2(g, run.seed, n_boot),
            cells=cv,
            states=states(g),
            plane=plane(g),
            regimes=regimes(g),
            trajectories=trajectories(g),
            families=families(cv, run.corruptions, run.severities),
        )
    out["accuracy_by_position"] = position_accuracy(run)
    out["vsi"] = vsi_block(run, support=vsi_support, ref=vsi_ref)
    out["missing"] = run_missing(run, out["vsi"])
    return out


def run_missing(run: StoredRun, vsi: dict[str, Any] | None) -> list[str]:
    """What this run could not give, in words (a server run: no tower, top-k VSI, no VSI)."""
    out = []
    if run.grid is None:
        out.append("Bench-C grid (no complete corruption x severity grid stored)")
    if vsi is None:
        out.append(
            "VSI (no VSI arrays for this series: a backend without next-token log-probabilities, "
            "or a baseline without VSI evidence)"
        )
    else:
        out.extend(vsi.get("missing", []))
    return out


def series_from_snapshots(
    base: snap.SnapshotBaseline, corruptions: Sequence[str], severities: Sequence[int]
) -> dict[str, Any]:
    """The baseline as its threshold snapshots record it."""
    any_payload = next(iter([*base.model.values(), *base.cells.values(), *base.vsi.values()]))
    keys = {spec.condition_key(c, s) for c in corruptions for s in severities}
    cv = {
        fig: {k: v for k, v in row.items() if k in keys}
        for fig, row in snap.cells_from_snapshots(base).items()
    }
    t2 = snap.table2_from_snapshots(base)
    missing = []
    over = {str(k) for p in base.model.values() for k in p.info.get("conditions") or ()}
    if over and over != keys:  # the model figures were recorded over another grid
        t2 = None
        missing.append(
            f"Table II (the baseline's snapshots record its model figures over {len(over)} "
            f"cells, not the {len(keys)} compared, and no per-pair evidence to recompute them)"
        )
    return {
        "label": "baseline",
        "kind": "baseline",
        "model": any_payload.model,
        "dataset": any_payload.dataset,
        "n": any_payload.n,
        "source": display_path(base.folder),
        "table2": t2,
        "cells": cv,
        "states": None,
        "plane": None,
        "regimes": None,
        "trajectories": None,
        "families": families(cv, corruptions, severities),
        "accuracy_by_position": None,
        "vsi": snap.vsi_from_snapshots(base),
        "problems": list(base.problems),
        "missing": missing,
    }


# -- like for like ------------------------------------------------------------------------------
#: What ``report.json`` ``subset.basis`` says: the gates' own rule (benchc.gates.check).
SUBSET_BASIS = (
    "the corruption x severity cells and the samples both sides have, as the gates compare them"
)


def _cells_text(corruptions: Sequence[str], severities: Sequence[int]) -> str:
    return (
        f"{len(corruptions) * len(severities)} cells ({len(corruptions)} corruptions x "
        f"severities {','.join(map(str, severities))})"
    )


def like_for_like(
    run: StoredRun, base: snap.SnapshotBaseline | None, base_run: StoredRun | None
) -> tuple[StoredRun, StoredRun | None, dict[str, Any] | None]:
    """The candidate and the baseline on what the gates compare (:func:`benchc.gates.check`:
    the cells both sides have and the samples both hold), and ``report.json``'s ``subset``
    block saying so; ``(run, base_run, None)`` without a baseline.

    Every table and figure of a report is drawn from the returned runs, so a subset run
    (``--corruptions=fog``, ``--severities=1,3,5``, ``--limit``) is never set against the
    baseline's whole grid.
    """
    if base is None or base.empty:
        return run, base_run, None
    full = {"candidate": _shape(run), "baseline": None}
    if base_run is not None and run.grid is not None:
        full["baseline"] = _shape(base_run)
        try:
            common = shared([run, base_run], ["candidate", "baseline"])
        except CompareError as exc:  # the gates could not compare either: say so, draw both
            return run, base_run, {**full, "basis": SUBSET_BASIS, "left_out": [str(exc)],
                                   "corruptions": [], "severities": [], "n_samples": None,
                                   "like_for_like": False}  # fmt: skip
        run, base_run = common.runs
        block = common.block()
        block.pop("sign", None)
    else:  # snapshots only: the cells they record
        recorded = set(base.cells)
        cs = [c for c in run.corruptions if all(
            spec.condition_key(c, s) in recorded for s in run.severities)]  # fmt: skip
        left = []
        if recorded and run.grid is not None and cs and cs != list(run.corruptions):
            left.append(f"candidate: {len(run.corruptions) - len(cs)} corruption(s) the "
                        "baseline has no snapshot of left out")  # fmt: skip
            run = restrict(run, None, cs, run.severities)
        block = {"corruptions": list(run.corruptions), "severities": list(run.severities),
                 "n_samples": len(run.ids), "left_out": left}  # fmt: skip
    block["basis"] = SUBSET_BASIS
    block["like_for_like"] = base_run is not None
    block["text"] = (
        f"compared on {_cells_text(block['corruptions'], block['severities'])}"
        + (f" and {block['n_samples']} samples" if block.get("n_samples") else "")
        + (f"; {'; '.join(block['left_out'])}" if block["left_out"] else "")
    )
    return run, base_run, {**full, **block}


def _shape(run: StoredRun) -> dict[str, Any]:
    return {"corruptions": list(run.corruptions), "severities": list(run.severities),
            "n_samples": len(run.ids)}  # fmt: skip


# -- verdicts ---------------------------------------------------------------------------------


def verdicts_block(
    verdicts: Sequence[dict[str, Any]] | None,
    note: str | None,
    record_command: str | None,
    accept_command: str | None = None,
) -> dict[str, Any]:
    """Gate verdicts: failures first, broadest level first, then by how far past the
    tolerance they went. ``record_command`` re-records the baseline from the released
    checkpoint; ``accept_command`` records this candidate as the baseline (None: the same)."""
    if accept_command == record_command:
        accept_command = None
    if verdicts is None:
        return {
            "available": False,
            "note": note or "no gate verdicts available",
            "items": [],
            "counts": {},
            "record_command": record_command,
            "accept_command": accept_command,
        }

    def key(v: dict[str, Any]) -> tuple:
        change, tol = num(v.get("change")), num(v.get("tolerance"))
        past = abs(change) / tol if change is not None and tol else 0.0
        return (
            STATUS_ORDER.get(str(v.get("status")), 9),
            LEVEL_ORDER.get(str(v.get("level")), 9),
            -past,
            str(v.get("case", "")),
            str(v.get("figure", "")),
        )

    items = []
    seen: dict[str, int] = {}
    for v in sorted(verdicts, key=key):
        item = {k: (num(x) if isinstance(x, float) else x) for k, x in v.items()}
        anchor = verdict_anchor(v)
        seen[anchor] = seen.get(anchor, 0) + 1
        item["anchor"] = anchor if seen[anchor] == 1 else f"{anchor}-{seen[anchor]}"
        items.append(item)
    counts: dict[str, int] = {}
    for v in items:
        counts[str(v.get("status"))] = counts.get(str(v.get("status")), 0) + 1
    return {
        "available": True,
        "note": note,
        "items": items,
        "counts": counts,
        "record_command": record_command,
        "accept_command": accept_command,
    }


def cell_status(verdicts: dict[str, Any]) -> dict[str, str]:
    """Worst gate status per cell key (fail > improved > pass), from cell-level verdicts."""
    out: dict[str, str] = {}
    for v in verdicts.get("items", []):
        if v.get("level") != "cell":
            continue
        scope, status = str(v.get("scope")), str(v.get("status"))
        if status not in ("fail", "improved", "pass"):
            continue
        old = out.get(scope)
        if old is None or STATUS_ORDER[status] < STATUS_ORDER[old]:
            out[scope] = status
    return out


# -- the document -----------------------------------------------------------------------------
def build(
    runs: Sequence[StoredRun],
    *,
    labels: Sequence[str] | None = None,
    baseline: snap.SnapshotBaseline | None = None,
    baseline_run: StoredRun | None = None,
    verdicts: Sequence[dict[str, Any]] | None = None,
    verdict_note: str | None = None,
    record_command: str | None = None,
    accept_command: str | None = None,
    drilldown: list[dict[str, Any]] | None = None,
    n_boot: int = N_BOOT,
    vsi_support: str = spec.VSI_SUPPORT,
    subset: dict[str, Any] | None = None,
    overall: dict[str, Any] | None = None,
    provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The report document of ``runs`` (one: a run against its baseline; several: compared).

    The first run sets the axes; the others and the baseline are overlaid on them. The
    baseline is ``baseline_run`` (the stored run the snapshots were recorded from, every block)
    when given, else what the snapshots themselves record.
    """
    if not runs:
        raise ValueError("build: no runs to report")
    has_baseline = baseline is not None and not baseline.empty
    if has_baseline and len(runs) == 1 and not labels:  # the gate's two sides, named
        labels = [f"candidate: {runs[0].model_name} / {runs[0].dataset_name}"]
    labels = list(labels) if labels else default_labels(runs)
    first = runs[0]
    ref = vsi_reference(runs, baseline, baseline_run, vsi_support)
    kw = {"n_boot": n_boot, "vsi_ref": ref, "vsi_support": vsi_support}
    series = [series_from_run(r, lab, **kw) for r, lab in zip(runs, labels, strict=True)]
    extra = _baseline_series(baseline, baseline_run, first, kw)
    if extra is not None:
        series.append(extra)
    vb = verdicts_block(verdicts, verdict_note, record_command, accept_command)
    title, sides = _title_and_sides(runs, labels, baseline if has_baseline else None)
    return {
        "schema": SCHEMA,
        "title": title,
        "sides": sides,
        "mode": "report" if len(runs) == 1 else "compare",
        "axes": _axes(first),
        "series": series,
        "baseline_note": _baseline_note(baseline, len(runs), baseline_run),
        "verdicts": vb,
        "cell_status": cell_status(vb),
        "drilldown": drilldown or [],
        "subset": subset,
        "overall": overall,
        "provenance": provenance,
    }


def _baseline_series(
    baseline: snap.SnapshotBaseline | None,
    baseline_run: StoredRun | None,
    first: StoredRun,
    kw: dict[str, Any],
) -> dict[str, Any] | None:
    """The baseline's series, overlaid on the runs': every block from the stored run its
    snapshots were recorded from when it is at hand, else what the snapshots record on the
    first run's grid; ``None`` without a readable baseline."""
    if baseline is None or baseline.empty:
        return None
    if baseline_run is not None:
        b = series_from_run(baseline_run, "baseline", **kw)
        b["name"] = baseline.folder.name
        b.update(
            kind="baseline",
            source=f"{display_path(baseline.folder)} ({display_path(baseline_run.path)})",
        )
        if b["vsi"] is None:
            b["vsi"] = snap.evidence_vsi(baseline) or snap.vsi_from_snapshots(baseline)
            b["missing"] = run_missing(baseline_run, b["vsi"])
        return b
    b = series_from_snapshots(baseline, first.corruptions, first.severities)
    b["name"] = baseline.folder.name
    return b


def _title_and_sides(
    runs: Sequence[StoredRun],
    labels: Sequence[str],
    baseline: snap.SnapshotBaseline | None,
) -> tuple[str, dict[str, Any] | None]:
    """The page title and, for one run against a (readable) ``baseline``, the two sides the
    gate compared, named: a reader sees which is the candidate before any number."""
    first = runs[0]
    if baseline is not None and len(runs) == 1:
        title = (
            f"benchc report: candidate {first.model_name} against baseline "
            f"{baseline.folder.name} on {first.dataset_name}"
        )
        sides = {
            "candidate": {"name": first.model_name, "source": display_path(first.path)},
            "baseline": {"name": baseline.folder.name, "source": display_path(baseline.folder)},
        }
        return title, sides
    if len(runs) == 1:
        return f"benchc report: {first.model_name} on {first.dataset_name}", None
    return "benchc compare: " + " vs ".join(labels), None


def _axes(first: StoredRun) -> dict[str, Any]:
    """The grid every series is drawn on: the first run's corruptions and severities, and
    the families (in :data:`benchc.spec.FAMILIES` order) that hold any of its corruptions."""
    return {
        "corruptions": list(first.corruptions),
        "severities": list(first.severities),
        "families": {
            f: [c for c in first.corruptions if c in cs]
            for f, cs in spec.FAMILIES.items()
            if any(c in first.corruptions for c in cs)
        },
    }


def vsi_reference(
    runs: Sequence[StoredRun],
    baseline: snap.SnapshotBaseline | None,
    baseline_run: StoredRun | None,
    support: str = spec.VSI_SUPPORT,
) -> VSIEvidence | None:
    """Whose low-VSI pool every series' Table 2 is read on (docs/spec.md §5: one pool, fixed
    by one reference model): the baseline's (its run, else its snapshot's VSI evidence); in a
    comparison without one, the first run's."""
    if baseline_run is not None and baseline_run.vsi is not None:
        return run_evidence(baseline_run, support)
    if baseline is not None and not baseline.empty:
        ev = snap.baseline_vsi_evidence(baseline)
        if ev is not None:
            return ev
    return run_evidence(runs[0], support) if len(runs) > 1 else None


def default_labels(runs: Sequence[StoredRun]) -> list[str]:
    if len(runs) == 1:
        return ["current"]
    labels = [f"{r.model_name} / {r.dataset_name}" for r in runs]
    if len(set(labels)) < len(labels):
        labels = [f"{lab} [{r.path.name}]" for lab, r in zip(labels, runs, strict=True)]
    return labels


def _baseline_note(
    baseline: snap.SnapshotBaseline | None, n_runs: int, run: StoredRun | None = None
) -> str:
    if n_runs > 1:
        return "runs compared side by side; the first sets the grid"
    if baseline is None:
        return "no threshold snapshots for this model: no baseline overlaid"
    if baseline.empty:
        return f"no readable snapshots in {display_path(baseline.folder)}"
    text = (
        f"baseline: threshold snapshots in {display_path(baseline.folder)} "
        f"({len(baseline.cells)} cells, "
        f"{len(baseline.model)} model figures, {len(baseline.vsi)} VSI figures)"
    )
    if run is not None:
        text += f"; per-pair figures from {display_path(run.path)}"
    else:
        text += "; no per-pair arrays (no readable evidence sidecar)"
    if baseline.problems:
        text += "; unreadable: " + "; ".join(baseline.problems)
    return text
