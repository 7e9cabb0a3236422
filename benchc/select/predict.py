"""Run selector models over candidates x corruptions x severities: the inputs of Eqs. 1-3.

Corrupted images stream from :func:`benchc.corruptions.iter_materialize` (cached, seeded), a few
samples at a time, so memory stays bounded; every selector scores the same images.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchc.corruptions import CorruptionCache, iter_materialize
from benchc.data.sample import Dataset
from benchc.models.base import Backend, Query
from benchc.models.collate import score
from benchc.select.embed import thumbnail_embeddings
from benchc.spec import CLEAN, CORRUPTIONS, SEVERITIES, condition_key


@dataclass(frozen=True)
class Predictions:
    """``top1`` int64 (F, Q, D, L): each selector's top-1 option per sample, corruption,
    severity; ``clean_top1`` int64 (F, Q); ``image_emb`` float64 (Q, E) from the first
    selector's pooled vision features of the clean image (``image_source`` says which)."""

    top1: np.ndarray
    clean_top1: np.ndarray
    image_emb: np.ndarray
    image_source: str
    corruptions: tuple[str, ...]


def top1_from_logits(option_logits: np.ndarray) -> np.ndarray:
    """argmax over the sample's own options (NaN padding excluded); ties -> lowest index."""
    logits = np.asarray(option_logits, dtype=np.float64)
    return np.where(np.isnan(logits), -np.inf, logits).argmax(axis=-1).astype(np.int64)


def collect_predictions(
    selectors: Sequence[Backend],
    dataset: Dataset,
    *,
    image_size: int | None,
    seed: int,
    corruptions: Sequence[str] = CORRUPTIONS,
    cache: CorruptionCache | None = None,
    workers: int = 1,
    chunk: int = 8,
    progress: bool = False,
) -> Predictions:
    """Score every (sample, condition) with every selector; see :class:`Predictions`."""
    if not selectors:
        raise ValueError("collect_predictions() needs at least one selector")
    unknown = [c for c in corruptions if c not in CORRUPTIONS]
    if unknown or not corruptions:
        raise ValueError(f"unknown or no corruptions {unknown or corruptions!r}")
    conds = [CLEAN] + [condition_key(c, s) for c in corruptions for s in SEVERITIES]
    n, f, d, lv = len(dataset), len(selectors), len(corruptions), len(SEVERITIES)
    top1 = np.full((f, n, d, lv), -1, np.int64)
    clean = np.full((f, n), -1, np.int64)
    emb_parts: list[np.ndarray] = []
    image_source = f"vision_features:{selectors[0].name}"
    index = {s.id: i for i, s in enumerate(dataset)}
    buffer: list[tuple[int, dict[str, np.ndarray]]] = []

    def flush() -> None:
        nonlocal image_source
        queries = []
        for i, images in buffer:
            s = dataset[i]
            queries += [Query(images[c], s.question, s.options, s.hint, s.id) for c in conds]
        for fi, backend in enumerate(selectors):
            pred = top1_from_logits(score(backend, queries).option_logits)
            pred = pred.reshape(len(buffer), len(conds))
            rows = [i for i, _ in buffer]
            clean[fi, rows] = pred[:, 0]
            top1[fi, rows] = pred[:, 1:].reshape(len(buffer), d, lv)
        cleans = [images[CLEAN] for _, images in buffer]
        try:
            emb_parts.append(np.asarray(selectors[0].vision_features(cleans), np.float64))
        except NotImplementedError:
            image_source = "thumbnail16"
            emb_parts.append(thumbnail_embeddings(cleans))
        buffer.clear()

    items = [(s.id, s.image()) for s in dataset]
    stream = iter_materialize(
        items,
        conds,
        image_size=image_size,
        seed=seed,
        cache=cache,
        workers=workers,
        progress=progress,
    )
    for sid, images in stream:
        buffer.append((index[sid], images))
        if len(buffer) >= chunk:
            flush()
    if buffer:
        flush()
    if len({p.shape[1] for p in emb_parts}) > 1:  # a mix of vision features and thumbnails
        raise ValueError(
            f"selector {selectors[0].name!r} gave vision features for some images only"
        )
    return Predictions(top1, clean, np.concatenate(emb_parts), image_source, tuple(corruptions))


#: File name of saved predictions beside a selection (``--reuse-predictions`` reads it back).
PREDICTIONS_NPZ = "selection_predictions.npz"


def save_predictions(
    path: str | Path,
    preds: Predictions,
    *,
    ids: Sequence[str],
    digests: Sequence[str],
    selector_names: Sequence[str],
    selector_fingerprints: Sequence[str],
    seed: int,
    image_size: int | None,
) -> None:
    """Store everything selection needs from the models, so it can be redone without them."""
    np.savez_compressed(
        path,
        ids=np.array(ids),
        digests=np.array(digests),
        selectors=np.array(selector_names),
        fingerprints=np.array(selector_fingerprints),
        top1=preds.top1.astype(np.int8),  # K <= 26 fits
        clean_top1=preds.clean_top1.astype(np.int8),
        image_emb=preds.image_emb.astype(np.float32),
        image_source=np.array(preds.image_source),
        corruptions=np.array(preds.corruptions),
        seed=np.array(seed),
        image_size=np.array(-1 if image_size is None else image_size),
    )


def load_predictions(
    path: str | Path,
    ids: Sequence[str],
    digests: Sequence[str],
    *,
    seed: int,
    image_size: int | None,
) -> tuple[Predictions, list[str], list[str]]:
    """Saved predictions for ``ids`` (any subset, any order of the saved pool).

    ``digests`` (``benchc.data.fingerprint.sample_digest``) guard against a sample that kept
    its id but changed content. Returns the predictions and the selectors' names and
    fingerprints. Raises ``ValueError`` naming the file when a sample is missing or differs,
    or the corruption seed / image size differ.
    """
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    saved_size = int(data["image_size"])
    saved_size = None if saved_size < 0 else saved_size
    if int(data["seed"]) != seed or saved_size != image_size:
        raise ValueError(
            f"{path}: predictions were made with seed={int(data['seed'])}, "
            f"image_size={saved_size}; this run asks for seed={seed}, image_size={image_size}"
        )
    row = {sid: i for i, sid in enumerate(data["ids"].tolist())}
    missing = [sid for sid in ids if sid not in row]
    if missing:
        raise ValueError(
            f"{path}: no saved predictions for {len(missing)} sample(s), e.g. {missing[0]!r}"
        )
    rows = np.array([row[sid] for sid in ids], dtype=np.int64)
    saved = data["digests"][rows].tolist()
    changed = [sid for sid, a, b in zip(ids, digests, saved, strict=True) if a != b]
    if changed:
        raise ValueError(
            f"{path}: {len(changed)} sample(s) differ from the ones predicted "
            f"(same id, other content), e.g. {changed[0]!r}"
        )
    preds = Predictions(
        top1=data["top1"][:, rows].astype(np.int64),
        clean_top1=data["clean_top1"][:, rows].astype(np.int64),
        image_emb=data["image_emb"][rows].astype(np.float64),
        image_source=str(data["image_source"]),
        corruptions=tuple(data["corruptions"].tolist()),
    )
    return preds, data["selectors"].tolist(), data["fingerprints"].tolist()


def combine_predictions(
    paths: Sequence[str | Path],
    ids: Sequence[str],
    digests: Sequence[str],
    *,
    seed: int,
    image_size: int | None,
) -> tuple[Predictions, list[str], list[str], list[str]]:
    """Stack the selectors of several saved runs (e.g. one process per selector).

    Returns predictions, selector names, fingerprints and the file each selector came from;
    image embeddings are the first file's. All files must share the corruptions.
    """
    if not paths:
        raise ValueError("combine_predictions() needs at least one file")
    parts = [
        (p, *load_predictions(p, ids, digests, seed=seed, image_size=image_size)) for p in paths
    ]
    first = parts[0][1]
    for p, pred, _, _ in parts[1:]:
        if pred.corruptions != first.corruptions:
            raise ValueError(f"{p}: corruptions differ from {paths[0]}'s")
    names = [n for _, _, ns, _ in parts for n in ns]
    if len(set(names)) != len(names):
        raise ValueError(f"selector names repeat across {list(map(str, paths))}: {names}")
    preds = Predictions(
        top1=np.concatenate([pred.top1 for _, pred, _, _ in parts]),
        clean_top1=np.concatenate([pred.clean_top1 for _, pred, _, _ in parts]),
        image_emb=first.image_emb,
        image_source=first.image_source,
        corruptions=first.corruptions,
    )
    fingerprints = [f for _, _, _, fs in parts for f in fs]
    sources = [str(p) for p, _, ns, _ in parts for _ in ns]
    return preds, names, fingerprints, sources
