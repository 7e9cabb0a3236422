"""The VSI part of the suite (docs/spec.md §5): per-sample VSI under a region blur, the own-tower
probe and the argmax change, as stored arrays and as the evidence the VSI gates compare.

Per batch we keep only what the figures need (VSI, top-1 tokens, pooled vision features):
full next-token distributions of a real model (150k-token vocabularies) would not fit on disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from benchc import spec
from benchc.gates.evidence import VSIEvidence
from benchc.metrics.vsi import vsi_full, vsi_topk
from benchc.models.collate import score

if TYPE_CHECKING:
    from benchc.suite.run import SuiteRun


class VSIUnavailable(RuntimeError):
    """The backend exposes no next-token distribution or no vision tower."""


def vsi_arrays(run: SuiteRun) -> dict[str, np.ndarray]:
    """Per-sample VSI arrays of ``run``'s dataset (see :func:`compute_vsi_batch`), computed batch by
    batch through its results store under ``run.vsi_name``, so a killed run resumes."""

    def compute(start: int, stop: int) -> dict[str, np.ndarray]:
        return compute_vsi_batch(run, start, stop)

    return run.store.get_or_compute(run.vsi_name, len(run.dataset), run.chunk_rows, compute)


def compute_vsi_batch(run: SuiteRun, start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows ``start:stop``: ``vsi``, ``top1_clean``/``top1_blur``, ``located`` (region from the
    locator), ``fallback`` (whole-image blur: no annotation and no located region), and, as the
    backend's :class:`~benchc.models.base.Capabilities` allow, ``vsi_top50`` and
    ``features_clean``/``features_blur`` (its own tower, for the gap's probe).

    A backend with the full next-token distribution gives the VSI of docs/spec.md §5; one that
    serves only top-k log-probs (an OpenAI-compatible server) gives the documented top-k variant
    in ``vsi`` and says so in ``vsi_topk`` (k); one with neither has no VSI."""
    backend = run.backend
    caps = backend.capabilities
    if caps.full_distribution:
        kwargs = {"distribution": True, "top_k": spec.VSI_TOPK}
    elif caps.top_k != 0:
        k = spec.VSI_TOPK if caps.top_k is None else min(spec.VSI_TOPK, caps.top_k)
        kwargs = {"distribution": False, "top_k": k}
    else:
        raise VSIUnavailable(f"{backend.name}: VSI needs next-token (top-k) log-probabilities")
    clean = run.prepared(start, stop)
    blurred, located, fallback = run.blurred(start, stop)
    outs = []
    for images in (clean, blurred):
        try:
            out = score(backend, run._queries(images, start), batch_size=run.batch_size, **kwargs)
        except NotImplementedError as exc:  # a server that turned out to give no log-probs
            raise VSIUnavailable(f"{backend.name}: {exc}") from exc
        if out.top_ids is None or (kwargs["distribution"] and out.logprobs is None):
            raise VSIUnavailable(f"{backend.name}: the backend returned no next-token distribution")
        outs.append(out)
    c, b = outs
    arrays = {
        "vsi_top50": vsi_topk(c.top_ids, c.top_logprobs, b.top_ids, b.top_logprobs),
        "top1_clean": c.top_ids[:, 0].astype(np.int64),
        "top1_blur": b.top_ids[:, 0].astype(np.int64),
        "located": located,
        "fallback": fallback,
    }
    if kwargs["distribution"]:
        arrays["vsi"] = vsi_full(c.logprobs, b.logprobs)
        arrays["top1_clean"] = np.argmax(c.logprobs, axis=1).astype(np.int64)
        arrays["top1_blur"] = np.argmax(b.logprobs, axis=1).astype(np.int64)
    else:
        arrays["vsi"] = arrays["vsi_top50"]
        arrays["vsi_topk"] = np.full(stop - start, kwargs["top_k"], dtype=np.int64)
    if caps.vision_tower:
        try:
            arrays["features_clean"] = np.asarray(backend.vision_features(clean), np.float32)
            arrays["features_blur"] = np.asarray(backend.vision_features(blurred), np.float32)
        except NotImplementedError:
            pass  # no tower after all: the gap is undefined and says so
    return arrays


def vsi_evidence(arrays: dict[str, np.ndarray], ids: list[str]) -> VSIEvidence:
    """Per-sample VSI, argmax change and held-out probe correctness
    (:meth:`benchc.gates.evidence.VSIEvidence.from_run`)."""
    return VSIEvidence.from_run(arrays, ids)


def vsi_info(arrays: dict[str, np.ndarray], region_locator: str) -> dict[str, object]:
    """How the VSI regions were obtained (docs/spec.md §5: fallbacks are counted and reported)."""
    vsi = arrays["vsi"].astype(np.float64)
    k = int(arrays["vsi_topk"][0]) if "vsi_topk" in arrays and arrays["vsi_topk"].size else 0
    return {
        "vsi_variant": f"vsi_top{k}" if k else "vsi (full distribution)",
        "probe": "own vision tower" if "features_clean" in arrays else "none (no vision tower)",
        "region_locator": region_locator,
        "regions_located": int(arrays["located"].sum()) if "located" in arrays else 0,
        "region_fallbacks": int(arrays["fallback"].sum()),
        "median_vsi": round(float(np.median(vsi)), 6),
    }
