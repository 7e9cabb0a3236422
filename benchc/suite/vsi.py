"""The VSI part of the suite (docs/spec.md §5): per-sample VSI under a region blur, the own-tower
probe and the argmax change, as stored arrays and as the evidence the VSI gates compare.

Per batch we keep only what the figures need (VSI, top-1 tokens, pooled vision features):
full next-token distributions of a real model (150k-token vocabularies) would not fit on disk.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol

import numpy as np

from benchc import spec
from benchc.gates.evidence import VSIEvidence, vsi_values
from benchc.metrics.vsi import vsi_aligned, vsi_full, vsi_topk
from benchc.models.base import Backend, BatchOutput, Capabilities, Query
from benchc.models.collate import concat_outputs, score, take_rows
from benchc.provenance import sklearn_version


class VSIRun(Protocol):
    """What the VSI chunk reads of its run: :class:`benchc.suite.run.SuiteRun`, whose one chunk
    function (``compute_chunk``) calls :func:`compute_vsi_batch` (a protocol, not an import of
    the run's module: the two would import each other)."""

    backend: Backend
    batch_size: int
    k_max: int
    vsi_name: str

    def vsi_inputs(self, start: int, stop: int) -> Any: ...

    def _queries(self, images: Any, start: int, encoded: Any = None) -> list[Query]: ...

    def get_or_compute(self, name: str, compute: Any) -> dict[str, np.ndarray]: ...

    def compute_chunk(self, name: str, start: int, stop: int) -> dict[str, np.ndarray]: ...

    def drop_vsi_ahead(self) -> None: ...


class VSIUnavailable(RuntimeError):
    """The backend exposes no next-token distribution or no vision tower."""


def vsi_arrays(run: VSIRun) -> dict[str, np.ndarray]:
    """Per-sample VSI arrays of ``run``'s dataset (see :func:`compute_vsi_batch`), computed batch by
    batch through its results store under ``run.vsi_name``, so a killed run resumes."""

    def compute(start: int, stop: int) -> dict[str, np.ndarray]:
        return run.compute_chunk(run.vsi_name, start, stop)

    try:
        return run.get_or_compute(run.vsi_name, compute)
    finally:
        run.drop_vsi_ahead()


def compute_vsi_batch(run: VSIRun, start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows ``start:stop`` of the VSI arrays, from three passes over the same samples: clean,
    region-blurred and whole-image-blurred (docs/spec.md §5).

    ``vsi``/``vsi_top50`` and ``top1_clean``/``top1_blur`` (region blur); ``vsi_whole``/
    ``vsi_whole_top50`` and ``top1_whole`` (whole-image blur, VSI Table 1 and Table 3's VSI_w);
    ``option_logits`` (the clean pass's own option logits: the answers the error signals score);
    ``located``/``fallback`` (how the region was found); and, as the backend's
    :class:`~benchc.models.base.Capabilities` allow, ``features_clean``/``features_blur`` (its
    own tower, for the gap's probe).

    A backend with the full next-token distribution gives the full-vocabulary VSI in ``vsi``;
    one that serves only top-k log-probs (an OpenAI-compatible server) gives the documented
    top-k variant there too and says so in ``vsi_topk`` (k); one with neither has no VSI."""
    backend = run.backend
    caps = backend.capabilities
    kwargs = _score_kwargs(backend, caps)
    inputs = run.vsi_inputs(start, stop)
    clean, blurred, located, fallback = inputs[:4]

    # The gap probe's features come from the clean and blurred passes' own tower runs where the
    # backend can hand them over; else the tower encodes the images once more.
    in_pass = caps.vision_tower and "features" in inspect.signature(backend.forward).parameters
    scored = _scorer(backend, run.batch_size, kwargs)
    c = scored(run._queries(clean, start, _files(inputs, 7)), features=in_pass)
    b = scored(run._queries(blurred, start, _files(inputs, 5)), features=in_pass)
    whole = run._queries(inputs[4], start, _files(inputs, 6))
    w = whole_pass(whole, fallback, b, scored)
    logits = np.full((stop - start, run.k_max), np.nan, dtype=np.float32)
    logits[:, : c.option_logits.shape[1]] = c.option_logits
    arrays = {
        "option_logits": logits,
        "located": located,
        "fallback": fallback,
    }
    _add_vsi(arrays, c, b, w, kwargs["distribution"])
    if kwargs["distribution"]:
        arrays["top1_clean"] = np.argmax(c.logprobs, axis=1).astype(np.int64)
    else:
        arrays["top1_clean"] = c.top_ids[:, 0].astype(np.int64)
        arrays["vsi_topk"] = np.full(stop - start, kwargs["top_k"], dtype=np.int64)
    _add_features(arrays, backend, caps.vision_tower, (c, b), (clean, blurred), _files(inputs, 5))
    return arrays


def _score_kwargs(backend: Backend, caps: Capabilities) -> dict[str, Any]:
    """How to score a VSI pass on ``backend``: the full distribution where it has one, else
    its top-k log-probs (k at most ``spec.VSI_TOPK``); checked before any input is built, so a
    backend with neither costs no blur."""
    if caps.full_distribution:
        return {"distribution": True, "top_k": spec.VSI_TOPK}
    if caps.top_k != 0:
        k = spec.VSI_TOPK if caps.top_k is None else min(spec.VSI_TOPK, caps.top_k)
        return {"distribution": False, "top_k": k}
    raise VSIUnavailable(f"{backend.name}: VSI needs next-token (top-k) log-probabilities")


def _scorer(
    backend: Backend, batch_size: int, kwargs: dict[str, Any]
) -> Callable[..., BatchOutput]:
    """One VSI pass's scoring, turning a backend that gives no next-token distribution after
    all (a server without log-probs) into :class:`VSIUnavailable` rather than a crash."""

    def scored(queries: list[Query], features: bool = False) -> BatchOutput:
        try:
            out = score(backend, queries, batch_size=batch_size, features=features, **kwargs)
        except NotImplementedError as exc:  # a server that turned out to give no log-probs
            raise VSIUnavailable(f"{backend.name}: {exc}") from exc
        if out.top_ids is None or (kwargs["distribution"] and out.logprobs is None):
            raise VSIUnavailable(f"{backend.name}: the backend returned no next-token distribution")
        return out

    return scored


def _add_vsi(
    arrays: dict[str, np.ndarray],
    c: BatchOutput,
    b: BatchOutput,
    w: BatchOutput,
    distribution: bool,
) -> None:
    """The region (``b``) and whole-image (``w``) VSI against the clean pass ``c`` and each
    blurred pass's top-1 token, added to ``arrays`` in the stored order."""
    for suffix, other, top1 in (("", b, "top1_blur"), ("_whole", w, "top1_whole")):
        if distribution:  # each side's own probabilities on the aligned support
            arrays[f"vsi{suffix}_top50"] = vsi_aligned(
                c.logprobs, other.logprobs, ids_clean=c.top_ids, ids_perturbed=other.top_ids
            )
        else:  # a server's top k: unknown probabilities estimated (docs/spec.md §5)
            arrays[f"vsi{suffix}_top50"] = vsi_topk(
                c.top_ids, c.top_logprobs, other.top_ids, other.top_logprobs
            )
        if distribution:
            arrays[f"vsi{suffix}"] = vsi_full(c.logprobs, other.logprobs)
            arrays[top1] = np.argmax(other.logprobs, axis=1).astype(np.int64)
        else:
            arrays[f"vsi{suffix}"] = arrays[f"vsi{suffix}_top50"]
            arrays[top1] = other.top_ids[:, 0].astype(np.int64)


def _add_features(
    arrays: dict[str, np.ndarray],
    backend: Backend,
    tower: bool,
    passes: tuple[BatchOutput, BatchOutput],
    images: tuple[Any, Any],
    blur_files: Any,
) -> None:
    """The gap probe's tower features of the clean and region-blurred images, added to
    ``arrays``: the passes' own where they carried them, else one more tower run; none for a
    backend without a tower (the gap is then undefined and says so)."""
    (c, b), (clean, blurred) = passes, images
    if tower and c.features is not None and b.features is not None:
        arrays["features_clean"] = np.asarray(c.features, np.float32)
        arrays["features_blur"] = np.asarray(b.features, np.float32)
    elif tower:
        try:
            arrays["features_clean"] = np.asarray(backend.vision_features(clean), np.float32)
            blurred = _pixels(blurred, blur_files)
            arrays["features_blur"] = np.asarray(backend.vision_features(blurred), np.float32)
        except NotImplementedError:
            pass  # no tower after all: the gap is undefined and says so


def _files(inputs: Any, index: int) -> Any:
    """The PNG file bytes a run's VSI inputs carry at ``index`` (a blur read from or stored on
    the corruption cache; for a files-only backend ``(file bytes, pixels' CRC-32)`` lists), or
    ``None`` (a run that gives only the images)."""
    return inputs[index] if len(inputs) > index else None


def _pixels(images: list[np.ndarray | None], files: Any) -> list[np.ndarray]:
    """``images`` with each ``None`` (a blur a files-only backend was sent undecoded) decoded
    from its cache file: for a tower that reads pixels."""
    if all(image is not None for image in images):
        return list(images)
    from benchc.corruptions.cache import decode_rgb

    data = files[0] if isinstance(files, tuple) else files
    pairs = zip(images, data, strict=True)
    return [decode_rgb(f) if image is None else image for image, f in pairs]


def whole_pass(
    whole: list[Query],
    fallback: np.ndarray,
    region: BatchOutput,
    scored: Callable[[list[Query]], BatchOutput],
) -> BatchOutput:
    """The whole-image-blurred pass. A row whose region blur already fell back to the whole
    image has that very image, so its region output is reused and only the other rows are
    scored (a dataset without regions costs no third pass)."""
    if region.features is not None:  # the whole pass needs no tower features
        region = replace(region, features=None)
    if fallback.all():
        return region
    if not fallback.any():
        return scored(whole)
    need, reuse = np.flatnonzero(~fallback), np.flatnonzero(fallback)
    out = concat_outputs([scored([whole[i] for i in need]), take_rows(region, reuse)])
    return take_rows(out, np.argsort(np.r_[need, reuse], kind="stable"))


def vsi_evidence(
    arrays: dict[str, np.ndarray], ids: list[str], support: str = spec.VSI_SUPPORT
) -> VSIEvidence:
    """Per-sample VSI on ``support``, argmax change and the probes fitted on this run's own
    low-VSI pool (:meth:`benchc.gates.evidence.VSIEvidence.from_run`); a gate re-reads the
    current side on the baseline's pool."""
    return VSIEvidence.from_run(arrays, ids, support=support)


def vsi_variant(arrays: dict[str, np.ndarray], support: str = spec.VSI_SUPPORT) -> str:
    """The name of the VSI the gates read: ``vsi_top50``, ``vsi (full distribution)``, or a
    server's ``vsi_top<k>`` whichever support was asked for (docs/spec.md §5)."""
    k = int(arrays["vsi_topk"][0]) if "vsi_topk" in arrays and arrays["vsi_topk"].size else 0
    if k:
        return f"vsi_top{k} (estimated)"
    return spec.VSI_VARIANTS[support]


def vsi_info(
    arrays: dict[str, np.ndarray], region_locator: str, support: str = spec.VSI_SUPPORT
) -> dict[str, object]:
    """How the VSI was obtained (docs/spec.md §5: fallbacks are counted and reported), which
    variant is gated, and the scikit-learn release that split the probe's folds (GroupKFold
    assignments change between releases)."""
    vsi = vsi_values(arrays, support)
    return {
        "vsi_variant": vsi_variant(arrays, support),
        "sklearn": sklearn_version(),
        "probe": "own vision tower" if "features_clean" in arrays else "none (no vision tower)",
        "region_locator": region_locator,
        "regions_located": int(arrays["located"].sum()) if "located" in arrays else 0,
        "region_fallbacks": int(arrays["fallback"].sum()),
        "median_vsi": round(float(np.median(vsi)), 6),
    }
