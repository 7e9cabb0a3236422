"""The VSI part of the suite (SPEC 5): per-sample VSI under a region blur, the own-tower probe,
the argmax change rate and the encoder-LLM gap, as stored arrays and gated payloads.

Per batch we keep only what the figures need (VSI, top-1 tokens, pooled vision features):
full next-token distributions of a real model (150k-token vocabularies) would not fit on disk.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import numpy as np

from benchc import spec
from benchc.gates import DEFAULT_MODEL_RULES, Figure, Payload
from benchc.metrics.stats import bootstrap_se
from benchc.metrics.vsi import encoder_llm_gap, insensitive_fraction, vsi_full, vsi_topk
from benchc.models.collate import score
from benchc.suite.figures import GAP_N_BOOT, N_BOOT, VSI_FIGURES, rules_for

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


#: Gap SEs by content digest: the bootstrap refits hundreds of probes, and one process (the
#: suite's own pytester runs, a report after a run) asks again for the same stored arrays.
_GAP_SE_MEMO: dict[str, float] = {}


def gap_bootstrap_se(
    vsi: np.ndarray, gap_arrays: list[np.ndarray], *, seed: int, n_boot: int = GAP_N_BOOT
) -> float:
    """Bootstrap SE over samples of the encoder-LLM gap; each replicate refits the probe with
    repeated images grouped into one fold. A pure function of its inputs, so memoised."""
    digest = hashlib.blake2b(f"{seed}:{n_boot}".encode(), digest_size=16)
    for arr in (vsi, *gap_arrays):
        digest.update(f"{arr.dtype}{arr.shape}".encode())
        digest.update(np.ascontiguousarray(arr).tobytes())
    key = digest.hexdigest()
    if key not in _GAP_SE_MEMO:
        _GAP_SE_MEMO[key] = float(
            bootstrap_se(
                lambda rows: (
                    encoder_llm_gap(vsi[rows], *(a[rows] for a in gap_arrays), image_ids=rows).gap
                ),
                vsi.size,
                seed=seed,
                n_boot=n_boot,
            )
        )
    return _GAP_SE_MEMO[key]


def vsi_payload(arrays: dict[str, np.ndarray], figure: str, *, run: SuiteRun) -> Payload:
    """One VSI figure as a model-level payload.

    ``insensitive_fraction``: share with VSI < 0.05, bootstrap SE over samples.
    ``gap``: own-tower probe accuracy minus argmax change rate on the low-VSI subset, with a
    bootstrap SE over samples (SPEC 6) of :data:`GAP_N_BOOT` replicates; each replicate refits
    the probe with repeated images grouped into one fold.
    """
    from benchc.suite.cases import run_info

    if figure not in VSI_FIGURES:
        raise ValueError(f"unknown VSI figure {figure!r}; known: {list(VSI_FIGURES)}")
    vsi = arrays["vsi"].astype(np.float64)
    changed = (arrays["top1_clean"] != arrays["top1_blur"]).astype(np.float64)
    low = vsi < spec.VSI_INSENSITIVE
    info = {
        **run_info(run),
        "n": int(vsi.size),
        "region_locator": run.cfg.region_locator,
        "regions_located": int(arrays["located"].sum()) if "located" in arrays else 0,
        "region_fallbacks": int(arrays["fallback"].sum()),
        "median_vsi": round(float(np.median(vsi)), 6),
        "n_low_vsi": int(low.sum()),
    }
    if figure == "insensitive_fraction":
        value = insensitive_fraction(vsi)
        se = bootstrap_se(
            lambda rows: insensitive_fraction(vsi[rows]), vsi.size, seed=run.cfg.seed, n_boot=N_BOOT
        )
        fig = Figure(value, float(se), "insensitive")
        per_sample = {"insensitive": low.astype(np.float64)}
    else:
        gap_arrays = [
            arrays[k] for k in ("features_clean", "features_blur", "top1_clean", "top1_blur")
        ]
        gap = encoder_llm_gap(vsi, *gap_arrays)
        se = float("nan")
        if gap.probe is not None:
            se = gap_bootstrap_se(vsi, gap_arrays, seed=run.cfg.seed)
            info["probe_accuracy"] = round(gap.probe.accuracy, 6)
        info["argmax_change_rate"] = round(gap.change_rate, 6) if gap.n else None
        # A sample whose argmax stopped changing widens the gap: inverted per-sample direction.
        fig = Figure(gap.gap, float(se), "-argmax_changed")
        per_sample = {"argmax_changed": changed}
    return Payload(
        scope=f"vsi:{figure}",
        model=run.backend.name,
        dataset=run.dataset.name,
        n=int(vsi.size),
        figures={figure: fig},
        rules=rules_for([figure], DEFAULT_MODEL_RULES),
        ids=tuple(run.ids),
        per_sample=per_sample,
        info=info,
    )
