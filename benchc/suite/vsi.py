"""The VSI part of the suite (SPEC 5): per-sample VSI under a region blur, the own-tower probe
and the argmax change, as stored arrays and as the evidence the VSI gates compare.

Per batch we keep only what the figures need (VSI, top-1 tokens, pooled vision features):
full next-token distributions of a real model (150k-token vocabularies) would not fit on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from benchc import spec
from benchc.gates.evidence import VSIEvidence
from benchc.metrics.vsi import probe_accuracy, vsi_full, vsi_topk
from benchc.models.collate import score

if TYPE_CHECKING:
    from benchc.suite.run import SuiteRun


class VSIUnavailable(RuntimeError):
    """The backend exposes no next-token distribution or no vision tower."""


def compute_vsi_batch(run: SuiteRun, start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows ``start:stop``: ``vsi``, ``vsi_top50``, ``top1_clean``/``top1_blur``, ``located``
    (region from the locator), ``fallback`` (whole-image blur: no annotation and no located
    region), ``features_clean``/``features_blur``."""
    backend = run.backend
    if not backend.white_box:
        raise VSIUnavailable(f"{backend.name}: VSI needs white-box next-token distributions")
    clean = run.prepared(start, stop)
    blurred, located, fallback = run.blurred(start, stop)
    outs = []
    for images in (clean, blurred):
        queries = run._queries(images, start)
        out = score(
            backend, queries, batch_size=run.batch_size, distribution=True, top_k=spec.VSI_TOPK
        )
        if out.logprobs is None or out.top_ids is None:
            raise VSIUnavailable(f"{backend.name}: the backend returned no next-token distribution")
        outs.append(out)
    c, b = outs
    try:
        features = [backend.vision_features(clean), backend.vision_features(blurred)]
    except NotImplementedError as exc:
        raise VSIUnavailable(str(exc)) from exc
    return {
        "vsi": vsi_full(c.logprobs, b.logprobs),
        "vsi_top50": vsi_topk(c.top_ids, c.top_logprobs, b.top_ids, b.top_logprobs),
        "top1_clean": np.argmax(c.logprobs, axis=1).astype(np.int64),
        "top1_blur": np.argmax(b.logprobs, axis=1).astype(np.int64),
        "located": located,
        "fallback": fallback,
        "features_clean": np.asarray(features[0], dtype=np.float32),
        "features_blur": np.asarray(features[1], dtype=np.float32),
    }


def vsi_evidence(arrays: dict[str, np.ndarray], ids: list[str]) -> VSIEvidence:
    """Per-sample VSI, argmax change and held-out probe correctness (the probe fitted with
    grouped folds over all samples, SPEC 5 as read in :func:`benchc.metrics.vsi.encoder_llm_gap`).
    """
    changed = arrays["top1_clean"] != arrays["top1_blur"]
    if len(ids) >= 5:
        probe = probe_accuracy(arrays["features_clean"], arrays["features_blur"]).correct
    else:  # too few images for five grouped folds: the gap is undefined, never made up
        probe = np.full(len(ids), np.nan)
    return VSIEvidence(ids, arrays["vsi"], changed, probe)


def vsi_info(arrays: dict[str, np.ndarray], region_locator: str) -> dict[str, object]:
    """How the VSI regions were obtained (SPEC 5: fallbacks are counted and reported)."""
    vsi = arrays["vsi"].astype(np.float64)
    return {
        "region_locator": region_locator,
        "regions_located": int(arrays["located"].sum()) if "located" in arrays else 0,
        "region_fallbacks": int(arrays["fallback"].sum()),
        "median_vsi": round(float(np.median(vsi)), 6),
    }
