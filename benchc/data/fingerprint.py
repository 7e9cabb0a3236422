"""Dataset content hash: the cache key that invalidates results when any sample changes.

Hashes what defines a sample (id, image bytes, question, options, answer, and the metadata of
:data:`CONTENT_META`) in order, and nothing about where it was loaded from: not the file's name
(a TSV records its stem as ``meta["source"]``), its format, or a loader's own bookkeeping. The
same samples as JSONL, TSV, a parquet file or folder, or a ``save_to_disk`` folder get one
fingerprint, so they gate against one baseline.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from benchc.data.sample import Sample

#: ``benchc-data-1`` also hashed every metadata key, so a TSV's file name changed it.
FINGERPRINT_VERSION = "benchc-data-2"
#: The metadata that is part of a sample's content: what the prompt shows (``hint``), what the
#: report groups by (``category``, ``l2-category``) and the VSI region. Provenance (``source``,
#: ``split``, a generator's ``seed``) is not; a missing value and an empty text are the same.
CONTENT_META = ("category", "hint", "l2-category", "region")


def _canon(value: Any) -> Any:
    """JSON-able canonical form: tuples -> lists, arrays -> (shape, dtype, sha256)."""
    if isinstance(value, Mapping):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, np.ndarray):
        arr = np.ascontiguousarray(value)
        return {
            "ndarray": list(arr.shape),
            "dtype": str(arr.dtype),
            "sha256": hashlib.sha256(arr.tobytes()).hexdigest(),
        }
    if isinstance(value, np.generic):
        return value.item()
    return value


def content_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``meta`` that is content (:data:`CONTENT_META`), without empty values."""
    return {k: meta[k] for k in CONTENT_META if not _empty(meta.get(k))}


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "")


def sample_digest(sample: Sample) -> str:
    """sha256 of one sample's content."""
    h = hashlib.sha256()
    meta = _canon(content_meta(sample.meta))
    record = [sample.id, sample.question, list(sample.options), sample.answer, meta]
    h.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    h.update(hashlib.sha256(sample.image_bytes).digest())
    return h.hexdigest()


def fingerprint(samples: Iterable[Sample]) -> str:
    """Order-sensitive content hash of a dataset (first 16 hex digits of a sha256)."""
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for s in samples:
        h.update(bytes.fromhex(sample_digest(s)))
    return h.hexdigest()[:16]
