"""Drill-down: the samples that moved most, with thumbnails and both option distributions.

Which samples: the gates' own movers first (failing gates first), then the largest drop in
mean per-sample RAS against the overlaid series (the baseline's evidence, or the second run
compared), else the lowest mean RAS. Images are regenerated from the dataset with the
run's seed and image size (the corruptions are deterministic), so the report needs no image
store; when the dataset is not at hand the drill-down keeps its numbers and says why.
"""

from __future__ import annotations

import base64
import io
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchc import spec
from benchc.report.data import DRILL_SAMPLES, num
from benchc.results.reader import StoredRun

THUMB_PX = 120


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
) -> list[tuple[str, str]]:
    """``(sample id, why)`` of the samples to show, most important first; ``other`` is the
    overlaid series (the baseline, or the second run compared), named ``other_label``."""
    picked: dict[str, str] = {}
    order = {"fail": 0, "improved": 1}
    for v in sorted(verdicts or [], key=lambda v: order.get(str(v.get("status")), 9)):
        if v.get("status") not in order:
            continue
        for mover in v.get("movers") or []:
            sid = str(mover[0])
            if sid in run.ids and sid not in picked:
                picked[sid] = (
                    f"moved most in gate {v.get('label', v.get('figure'))} "
                    f"{v.get('scope')} ({v.get('status')})"
                )
    if run.grid is None:
        return list(picked.items())[:limit]
    current = _mean_ras_by_sample(run)
    ref = mean_ras_by_id(other, run)
    why = f"largest drop in mean RAS vs {other_label}" if ref else "lowest mean RAS over the grid"
    if ref:
        # ties (no change at all) fall back to the lowest mean RAS
        drop = [(ref[s] - c, c, s) for s, c in zip(run.ids, current, strict=True) if s in ref]
        ranked = [
            s
            for d, c, s in sorted(drop, key=lambda t: (-round(t[0], 9), t[1], t[2]))
            if np.isfinite(d) and np.isfinite(c)
        ]
    else:
        ranked = [s for c, s in sorted(zip(current, run.ids, strict=True)) if np.isfinite(c)]
    for sid in ranked:
        if len(picked) >= limit:
            break
        picked.setdefault(sid, why)
    return list(picked.items())[:limit]


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
        return None, f"dataset {where} cannot be loaded: {exc}"
    want = run.manifest.get("dataset_fingerprint")
    if want and ds.fingerprint != want:
        return None, f"dataset {where} changed since the run (fingerprint {ds.fingerprint})"
    return ds, None


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


def drilldown(
    run: StoredRun,
    picks: Sequence[tuple[str, str]],
    *,
    baseline_ras: dict[str, float] | None = None,
    images: bool = True,
) -> tuple[list[dict[str, Any]], str | None]:
    """One entry per picked sample (numbers JSON-able; ``thumbnails`` are data URIs that the
    page shows and ``report.json`` leaves out), plus a note when images are unavailable."""
    g = run.grid
    if g is None or not picks:
        return [], None
    ds, note = _open_dataset(run) if images else (None, "thumbnails off")
    by_id = {s.id: s for s in ds} if ds is not None else {}
    mean_ras = _mean_ras_by_sample(run)
    out = []
    for sid, why in picks:
        i = run.ids.index(sid)
        flat = np.where(np.isnan(g.ras[i]), np.inf, g.ras[i])
        d, l_ = np.unravel_index(int(np.argmin(flat)), flat.shape)
        cell = spec.condition_key(g.corruptions[d], run.severities[l_])
        k = int(g.n_options[i])
        entry: dict[str, Any] = {
            "id": sid,
            "why": why,
            "answer": int(g.answers[i]),
            "worst_cell": cell,
            "ras_worst": num(g.ras[i, d, l_]),
            "mean_ras": num(mean_ras[i]),
            "baseline_mean_ras": num((baseline_ras or {}).get(sid)),
            "p_clean": [num(x) for x in g.p_clean[i, :k]],
            "p_corrupted": [num(x) for x in g.p_corrupt[i, d, l_, :k]],
            "pred_clean": int(g.pred_clean[i]),
            "pred_corrupted": int(g.pred[i, d, l_]),
            "question": None,
            "options": None,
        }
        sample = by_id.get(sid)
        if sample is not None:
            entry["question"] = sample.question
            entry["options"] = list(sample.options)
            entry["thumbnails"] = _images(run, sample, cell)
        out.append(entry)
    return out, note
