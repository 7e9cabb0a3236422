"""The baseline a report overlays: the figures recorded in a model's threshold snapshots.

Snapshots are read only through :meth:`benchc.gates.Payload.from_json` and classified by their
``scope`` (``fog-3`` a cell, ``model:ras`` a model figure, ``vsi:gap`` a VSI figure), not by file
name, so the report keeps working whatever files the gates add. Per-pair arrays (what the
four-state, component-plane and trajectory figures need) come from the snapshots' evidence
sidecars, read through :mod:`benchc.gates.sidecar` (:func:`evidence_run`, :func:`evidence_vsi`);
without them those figures say so instead of inventing a baseline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from benchc import spec
from benchc.fsutil import display_path
from benchc.gates import Payload, sidecar
from benchc.gates.evidence import VSIEvidence
from benchc.metrics.figures import FigureDef, definition, reported_cells, table2_figures
from benchc.report.vsi import distribution_row, gap_table
from benchc.results.reader import StoredRun
from benchc.results.store import StoreError


@dataclass(frozen=True)
class SnapshotBaseline:
    """Every readable snapshot of one model, by kind; ``problems`` names the unreadable ones."""

    folder: Path
    cells: dict[str, Payload]
    model: dict[str, Payload]
    vsi: dict[str, Payload]
    problems: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.cells or self.model or self.vsi)


def read_snapshots(thresholds_dir: Path, model_name: str) -> SnapshotBaseline | None:
    """The snapshots in ``thresholds_dir/<model slug>/``; None when that folder does not exist."""
    from benchc.gates.baselines import resolve

    return read_folder(resolve(Path(thresholds_dir), None, model_name).folder)


def read_folder(folder: Path) -> SnapshotBaseline | None:
    """The snapshots of one baseline folder (any name); None when it does not exist."""
    folder = Path(folder)
    if not folder.is_dir():
        return None
    cells: dict[str, Payload] = {}
    model: dict[str, Payload] = {}
    vsi: dict[str, Payload] = {}
    problems: list[str] = []
    for path in sorted(folder.glob("*.json")):
        try:
            payload = Payload.from_json(path.read_text(encoding="utf-8"), where=display_path(path))
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"{path.name}: {exc}")
            continue
        if payload.level in ("model", "vsi"):  # one snapshot per figure, scope "model"/"vsi"
            target = model if payload.level == "model" else vsi
            for fig in payload.figures:
                target[fig] = payload
        elif payload.level == "cell":
            cells[payload.scope] = payload
        # family gates: their cells are drawn and the family means recomputed from them
    return SnapshotBaseline(folder, cells, model, vsi, problems)


def _num(x: object) -> float | None:
    try:
        v = float(x)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _fig(payload: Payload | None, name: str) -> dict[str, float | None] | None:
    if payload is None or name not in payload.figures:
        return None
    f = payload.figures[name]
    return {"value": _num(f.value), "se": _num(f.se)}


def recorded(payload: Payload | None, fig: FigureDef) -> dict[str, float | None] | None:
    """A figure as one snapshot records it: a gated figure's value and SE, else the info key
    it is stored under (``acc_clean``, ``acc_corrupt``), else derived from those
    (:attr:`FigureDef.from_recorded`); None where the snapshot holds none of it."""
    if payload is None:
        return None
    if fig.name in payload.figures:
        return _fig(payload, fig.name)
    v = _num(payload.info.get(fig.key))
    if v is None and fig.from_recorded is not None:
        parts = {name: recorded(payload, definition(name)) for name in fig.from_recorded[1]}
        if all(p is not None and p["value"] is not None for p in parts.values()):
            v = _num(fig.from_recorded[0](*(p["value"] for p in parts.values())))  # type: ignore[index]
    return None if v is None else {"value": v, "se": None}


def cells_from_snapshots(base: SnapshotBaseline) -> dict[str, dict[str, float | None]]:
    """Per cell figure, ``{cell key: value}`` as recorded; a figure no cell snapshot records
    (ΔS, ΔC) is left out rather than shown as a column of nulls."""
    out: dict[str, dict[str, float | None]] = {}
    for fig in reported_cells():
        row = {}
        for key, payload in sorted(base.cells.items()):
            got = recorded(payload, fig)
            row[key] = got["value"] if got else None
        if any(v is not None for v in row.values()):
            out[fig.name] = row
    return out


def table2_from_snapshots(base: SnapshotBaseline) -> dict[str, dict[str, float | None] | None]:
    """The Table II figures a snapshot set records (None where it records none): a model
    figure's own snapshot, else any model snapshot's info."""
    any_model = next(iter(base.model.values()), None)
    return {
        f.key: recorded(base.model.get(f.name), f) or recorded(any_model, f)
        for f in table2_figures()
    }


def vsi_from_snapshots(base: SnapshotBaseline) -> dict[str, object] | None:
    """VSI summary numbers as recorded (no per-sample VSI values: the JSON keeps flags only)."""
    ins, gap = base.vsi.get("insensitive_fraction"), base.vsi.get("gap")
    if ins is None and gap is None:
        return None
    info = {**(ins.info if ins else {}), **(gap.info if gap else {})}
    return {
        "n": _num(info.get("n")),
        "median": _num(info.get("median_vsi")),
        "insensitive_fraction": (_fig(ins, "insensitive_fraction") or {}).get("value"),
        "values": None,
        "gap": {
            "n_low": _num(info.get("n_low_vsi")),
            "probe_low": _num(info.get("probe_accuracy")),
            "probe_low_std": None,
            "change_low": _num(info.get("argmax_change_rate")),
            "probe_high": None,
            "change_high": None,
            "gap": (_fig(gap, "gap") or {}).get("value"),
        },
        "signals": None,
    }


def _sidecar(base: SnapshotBaseline, payloads: Sequence[Payload], kind: str):
    """The first readable evidence sidecar of ``kind`` among ``payloads``, with its payload and
    path: ``(payload, rel, evidence)``, or None."""
    for payload in payloads:
        rel = payload.evidence_file
        if not rel:
            continue
        try:
            ev = sidecar.load(base.folder, rel, payload.evidence_digest, where=payload.scope)
        except (ValueError, OSError, StoreError):
            continue
        if ev.kind == kind:
            return payload, rel, ev
    return None


def evidence_run(base: SnapshotBaseline) -> StoredRun | None:
    """The baseline's full grid from the snapshots' own per-sample sidecar (the option logits
    the paired gates resample), as a run the report draws like any other; None when the
    snapshots carry no such sidecar or it cannot be read."""
    from benchc.metrics.figures import definition

    payloads = sorted(  # a sidecar with the option rotations first (the same logits beside)
        base.model.values(), key=lambda p: not any(definition(f).rotations for f in p.figures)
    )
    found = _sidecar(base, payloads, "grid")
    if found is None:
        return None
    payload, rel, ev = found
    n, _, k = ev.logits.shape
    order = {}
    if ev.order is not None:
        for i, key in enumerate(ev.order.conditions):
            order[key] = {"option_logits": ev.order.logits[:, i], "offsets": ev.order.offsets}
    info = payload.info
    return StoredRun(
        path=base.folder / rel,
        manifest={
            "model_name": payload.model,
            "dataset_name": payload.dataset,
            "dataset_fingerprint": info.get("dataset_fingerprint"),
            "settings": {"seed": info.get("seed", spec.DEFAULT_SEED)},
        },
        ids=tuple(ev.ids),
        answers=ev.answers,
        n_options=ev.n_options,
        corruptions=ev.corruptions,
        severities=ev.severities,
        clean_logits=ev.logits[:, 0],
        logits=ev.logits[:, 1:].reshape(n, len(ev.corruptions), len(ev.severities), k),
        order=order,
    )


def baseline_vsi_evidence(base: SnapshotBaseline) -> VSIEvidence | None:
    """The VSI evidence the baseline's VSI snapshots carry (its pool included), or None."""
    found = _sidecar(base, list(base.vsi.values()), "vsi")
    return found[2] if found is not None else None


def evidence_vsi(base: SnapshotBaseline) -> dict[str, object] | None:
    """The baseline's per-sample VSI block from its VSI sidecar (Table 2 from the gates' own
    figures of that evidence; no fold std: the features are not stored), else None."""
    ev = baseline_vsi_evidence(base)
    if ev is None:
        return None
    vsi = np.asarray(ev.vsi, dtype=np.float64)
    fig = ev.figures()
    info = next((p.info for p in base.vsi.values()), {})
    return {
        "n": int(vsi.size),
        "median": _num(np.median(vsi)),
        "insensitive_fraction": _num(fig["insensitive_fraction"]),
        "values": [round(float(v), 6) for v in vsi],
        "gap": gap_table(ev, "own", info),
        "table1": [{"variant": "region blur", **distribution_row(vsi)}],
        "signals": None,
        "missing": [
            "VSI Table 3 and whole-image VSI (a snapshot keeps per-sample VSI, argmax change and "
            "probe results, not the VSI set's option answers or whole-image pass)"
        ],
    }
