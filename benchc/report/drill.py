"""Drill-down: the samples that moved most, with thumbnails and both option distributions.

Which samples: the gates' own movers first (failing gates first), then the largest drop in
mean per-sample RAS against the overlaid series (the baseline's evidence, or the second run
compared), else the lowest mean RAS. Which cell a card shows: a card there because of a gate
explains that gate, so it shows the gate's cell (for a family or model gate, the sample's worst
cell among the gate's cells); only a card tied to no gate shows the sample's worst cell over
the grid, and every card says which of the two it is. Images are regenerated from the dataset
with the run's seed and image size (the corruptions are deterministic), so the report needs no
image store; when the dataset is not at hand the drill-down keeps its numbers and says why.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from benchc import spec
from benchc.fsutil import display_path
from benchc.report.data import DRILL_SAMPLES, num, verdict_anchor
from benchc.report.fmt import moved
from benchc.results.reader import StoredRun

THUMB_PX = 120
#: Gate levels whose verdict names grid cells (a VSI gate names none: its card is not tied to one).
CELL_LEVELS = ("cell", "family", "model")


def sample_anchor(sid: str) -> str:
    """A sample card's HTML id: ``sample-<id>`` when the id is a valid, readable fragment
    (letters, digits, ``-_.:``), else its safe characters and a short hash (two ids that differ
    only in unsafe characters stay apart)."""
    import hashlib

    safe = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "-_.:") else "-" for ch in sid)
    if safe == sid and sid:
        return f"sample-{sid}"
    return f"sample-{safe}-{hashlib.sha256(sid.encode()).hexdigest()[:8]}"


def _ranked_why(drop: float, ref: float, cur: float, other_label: str) -> str:
    """A card's title when the drop in mean RAS picked it: what actually happened to it (a tie
    or a rise is not called a drop)."""
    if round(drop, 9) > 0:
        return f"largest drop in mean RAS vs {other_label}: {moved(ref, cur, 3)}"
    if round(drop, 9) == 0:
        return f"mean RAS unchanged vs {other_label} ({cur:+.3f}): the lowest of the unchanged"
    return f"mean RAS rose vs {other_label}: {moved(ref, cur, 3)} (no other sample dropped)"


class Pick(NamedTuple):
    """One sample to show, why, and the gate verdict that picked it (None: no gate)."""

    id: str
    why: str
    gate: dict[str, Any] | None = None


def _mean_ras_by_sample(run: StoredRun) -> np.ndarray:
    g = run.grid
    assert g is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(g.ras.reshape(g.shape[0], -1), axis=1)


def mean_ras_by_id(other: StoredRun | None, run: StoredRun) -> dict[str, float]:
    """Per sample id, ``other``'s mean RAS over its grid (empty when it has none, or other
    samples than ``run``)."""
    if other is None or other.grid is None or other.ids != run.ids:
        return {}
    return dict(zip(other.ids, (float(x) for x in _mean_ras_by_sample(other)), strict=True))


def pick_samples(
    run: StoredRun,
    *,
    verdicts: Sequence[dict[str, Any]] | None = None,
    other: StoredRun | None = None,
    other_label: str = "the compared run",
    limit: int = DRILL_SAMPLES,
) -> list[Pick]:
    """The samples to show, most important first, each with the gate that picked it (a mover
    of that gate) or None; ``other`` is the overlaid series (the baseline, or the second run
    compared), named ``other_label``."""
    picked: dict[str, Pick] = {}
    order = {"fail": 0, "improved": 1}
    for v in sorted(verdicts or [], key=lambda v: order.get(str(v.get("status")), 9)):
        if v.get("status") not in order:
            continue
        for mover in v.get("movers") or []:
            sid = str(mover[0])
            if sid in run.ids and sid not in picked:
                why = (
                    f"moved most in gate {v.get('label', v.get('figure'))} "
                    f"{v.get('scope')} ({v.get('status')}): {moved(*mover[1:3])}"
                )
                picked[sid] = Pick(sid, why, dict(v))
    if run.grid is None:
        return list(picked.values())[:limit]
    current = _mean_ras_by_sample(run)
    ref = mean_ras_by_id(other, run)
    if ref:
        # ties (no change at all) fall back to the lowest mean RAS
        drop = [(ref[s] - c, c, s) for s, c in zip(run.ids, current, strict=True) if s in ref]
        ranked = [
            (s, _ranked_why(d, ref[s], c, other_label))
            for d, c, s in sorted(drop, key=lambda t: (-round(t[0], 9), t[1], t[2]))
            if np.isfinite(d) and np.isfinite(c)
        ]
    else:
        ranked = [
            (s, f"lowest mean RAS over the grid ({c:+.3f})")
            for c, s in sorted(zip(current, run.ids, strict=True))
            if np.isfinite(c)
        ]
    for sid, why in ranked:
        if len(picked) >= limit:
            break
        picked.setdefault(sid, Pick(sid, why))
    return list(picked.values())[:limit]


def gate_cells(run: StoredRun, gate: dict[str, Any] | None) -> list[str]:
    """The run's grid cells a gate verdict covers, grouped as the gates group them: a cell
    gate its cell, a family gate the family's cells, a model gate every cell; none for a VSI
    gate, no gate, or a scope this grid lacks."""
    if not gate or gate.get("level") not in CELL_LEVELS:
        return []
    grid = list(run.cells)
    level, scope = gate["level"], str(gate.get("scope"))
    if level == "cell":
        return [scope] if scope in grid else []
    if level == "family":
        from benchc.spec import family_cells  # the gates' own grouping

        return family_cells(grid).get(scope, [])
    return grid


def _gate_name(gate: dict[str, Any]) -> str:
    return f"{gate.get('label') or gate.get('figure')} {gate.get('scope')} ({gate.get('status')})"


def shown_cell(run: StoredRun, i: int, gate: dict[str, Any] | None) -> tuple[str, str, str]:
    """``(cell key, basis, note)`` of the cell a card of sample row ``i`` shows.

    basis ``gate``: the gate's own cell, or for a family / model gate the sample's lowest-RAS
    cell among the gate's cells; basis ``worst``: the sample's lowest-RAS cell over the grid
    (a card no cell gate picked). ``note`` says which, in words, for the card.
    """
    g = run.grid
    assert g is not None
    keys = run.cells  # row-major over (corruption, severity), as the grid's arrays
    ras = dict(zip(keys, g.ras[i].reshape(-1), strict=True))
    cells = gate_cells(run, gate)

    def worst(among: Sequence[str]) -> str:
        # NaN (an undefined pair) never wins; all undefined: the first cell
        return min(among, key=lambda k: (np.isnan(ras[k]), ras[k] if np.isfinite(ras[k]) else 0))

    if gate and cells:
        level = gate["level"]
        if level == "cell":
            return cells[0], "gate", f"image: the cell of gate {_gate_name(gate)}"
        where = f"family {gate.get('scope')}" if level == "family" else "the model's grid"
        return (
            worst(cells),
            "gate",
            f"image: this sample's worst cell in {where}, the cells of gate {_gate_name(gate)}",
        )
    why = f"gate {_gate_name(gate)} names no cell" if gate else "not tied to a cell gate"
    note = f"image: this sample's worst cell over the grid ({why})"
    return worst(keys), "worst", note


def _thumb(array: np.ndarray) -> str:
    from PIL import Image

    im = Image.fromarray(np.asarray(array, dtype=np.uint8))
    im.thumbnail((THUMB_PX, THUMB_PX))
    buf = io.BytesIO()
    im.save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _open_dataset(run: StoredRun):
    """The run's dataset, or a reason it cannot be used for thumbnails."""
    from benchc.data import load_dataset

    where = run.manifest.get("dataset_spec")
    if not where:
        return None, "the manifest names no dataset"
    try:
        ds = load_dataset(where)
    except Exception as exc:  # any loader error: the numbers stay, the pictures go
        return None, f"dataset {_shown(where)} cannot be loaded: {exc}"
    want = run.manifest.get("dataset_fingerprint")
    if want and ds.fingerprint != want:
        return None, f"dataset {_shown(where)} changed since the run (fingerprint {ds.fingerprint})"
    return ds, None


def _shown(where: str) -> str:
    """A dataset spec as the page shows it: a local folder by the one path rule, a name as is."""
    return display_path(where) if Path(where).exists() else where


def _images(run: StoredRun, sample: Any, cell: str) -> dict[str, str]:
    from benchc.corruptions import corrupt_array, region_blur, scale_region, whole_blur
    from benchc.data.images import prepare

    size = run.manifest.get("settings", {}).get("image_size")
    pil = sample.image()
    clean = prepare(pil, size, what=f"sample {sample.id!r}")
    c, s = spec.parse_condition(cell)
    corrupted = corrupt_array(clean, c, s, seed=run.seed, sample_id=sample.id)
    if sample.region is not None:
        dst = (clean.shape[1], clean.shape[0])
        blurred = region_blur(
            clean, scale_region(sample.region, pil.size, dst), sigma=spec.VSI_SIGMA
        )
        blur_note = "question region blurred"
    else:
        blurred = whole_blur(clean, spec.VSI_SIGMA)
        blur_note = "no region annotated: whole image blurred"
    return {
        "clean": _thumb(clean),
        "corrupted": _thumb(corrupted),
        "blurred": _thumb(blurred),
        "blur_note": blur_note,
    }


def answers_in(run: StoredRun, sid: str, cell: str, label: str) -> dict[str, Any] | None:
    """One run's answer to sample ``sid``, clean and in ``cell`` (its option distribution, its
    pick, whether right), or None when the run holds no such sample or cell."""
    g = run.grid
    if g is None or sid not in run.ids or cell not in run.cells:
        return None
    i = run.ids.index(sid)
    c, sev = spec.parse_condition(cell)
    d, j = g.corruptions.index(c), list(run.severities).index(sev)
    k, answer = int(g.n_options[i]), int(g.answers[i])
    pred_clean, pred_corrupted = int(g.pred_clean[i]), int(g.pred[i, d, j])
    return {
        "label": label,
        "p_clean": [num(x) for x in g.p_clean[i, :k]],
        "p_corrupted": [num(x) for x in g.p_corrupt[i, d, j, :k]],
        "pred_clean": pred_clean,
        "pred_corrupted": pred_corrupted,
        "correct_clean": pred_clean == answer,
        "correct_corrupted": pred_corrupted == answer,
    }


def drilldown(
    run: StoredRun,
    picks: Sequence[Pick | tuple[str, str]],
    *,
    baseline_ras: dict[str, float] | None = None,
    images: bool = True,
    vsi: tuple[dict[str, float], dict[str, float]] | None = None,
    other: StoredRun | None = None,
    labels: tuple[str, str] = ("candidate", "baseline"),
) -> tuple[list[dict[str, Any]], str | None]:
    """One entry per picked sample (numbers JSON-able; ``thumbnails`` are data URIs that the
    page shows and ``report.json`` leaves out), plus a note when images are unavailable.

    ``cell`` is the cell the card shows (image, corrupted distribution, RAS; see
    :func:`shown_cell`), ``cell_basis`` ``gate`` or ``worst`` and ``cell_note`` which in words;
    ``worst_cell`` stays the sample's worst cell over the grid; ``gate`` names the picking gate.
    ``vsi``: (baseline, current) VSI by sample id; a card a VSI gate picked carries its
    ``vsi`` baseline -> current (what that gate moved on, not a cell's RAS).
    ``other``: the overlaid run (the baseline's evidence, or the second run compared) and
    ``labels`` (this run's, the other's): ``answers`` holds both runs' answers in the card's
    cell, the other's first, so a card reads baseline beside candidate (``answers_note`` says
    why when the other run lacks the sample or the cell).
    """
    if run.grid is None or not picks:
        return [], None
    ds, note = _open_dataset(run) if images else (None, "thumbnails off")
    by_id = {s.id: s for s in ds} if ds is not None else {}
    mean_ras = _mean_ras_by_sample(run)
    out = []
    for pick in picks:
        card = Pick(*pick)
        sid, gate = card.id, card.gate
        entry = _card(run, card, mean_ras, baseline_ras, other, labels)
        if gate is not None and gate.get("level") == "vsi" and vsi is not None:
            entry["vsi"] = {"baseline": num(vsi[0].get(sid)), "current": num(vsi[1].get(sid))}
        sample = by_id.get(sid)
        if sample is not None:
            entry["question"] = sample.question
            entry["options"] = list(sample.options)
            entry["thumbnails"] = _images(run, sample, entry["cell"])
        out.append(entry)
    return out, note


def _worst_cell(run: StoredRun, i: int) -> tuple[str, Any, Any]:
    """Sample row ``i``'s lowest-RAS cell over the grid (an undefined pair never wins) as its
    key and grid indices: a card names it whichever cell it shows."""
    g = run.grid
    assert g is not None
    flat = np.where(np.isnan(g.ras[i]), np.inf, g.ras[i])
    d, l_ = np.unravel_index(int(np.argmin(flat)), flat.shape)
    return spec.condition_key(g.corruptions[d], run.severities[l_]), d, l_


def _gate_summary(gate: dict[str, Any] | None) -> dict[str, Any] | None:
    """What a card says of the gate that picked it: enough to name it and link its verdict."""
    if gate is None:
        return None
    return {
        "anchor": verdict_anchor(gate),
        **{x: gate.get(x) for x in ("level", "scope", "figure", "label", "status")},
    }


def _card(
    run: StoredRun,
    pick: Pick,
    mean_ras: np.ndarray,
    baseline_ras: dict[str, float] | None,
    other: StoredRun | None,
    labels: tuple[str, str],
) -> dict[str, Any]:
    """One picked sample's numbers (see :func:`drilldown`), without the dataset's question,
    options and thumbnails, which need the dataset at hand."""
    g = run.grid
    assert g is not None
    sid, why, gate = pick
    i = run.ids.index(sid)
    worst, d, l_ = _worst_cell(run, i)
    cell, basis, cell_note = shown_cell(run, i, gate)
    c, sev = spec.parse_condition(cell)
    cd, cl = g.corruptions.index(c), list(run.severities).index(sev)
    mine = answers_in(run, sid, cell, labels[0])
    assert mine is not None  # the run's own sample and cell
    theirs = answers_in(other, sid, cell, labels[1]) if other is not None else None
    entry: dict[str, Any] = {
        "id": sid,
        "why": why,
        "answer": int(g.answers[i]),
        "cell": cell,
        "cell_basis": basis,
        "cell_note": cell_note,
        "ras_cell": num(g.ras[i, cd, cl]),
        "gate": _gate_summary(gate),
        "worst_cell": worst,
        "ras_worst": num(g.ras[i, d, l_]),
        "mean_ras": num(mean_ras[i]),
        "baseline_mean_ras": num((baseline_ras or {}).get(sid)),
        **{x: mine[x] for x in ("p_clean", "p_corrupted", "pred_clean", "pred_corrupted")},
        "question": None,
        "options": None,
    }
    entry["anchor"] = sample_anchor(sid)
    entry["answers"] = [a for a in (theirs, mine) if a is not None]
    entry["answers_note"] = (
        None
        if other is None or theirs is not None
        else f"{labels[1]} holds no answer to this sample in {cell}"
    )
    return entry
