"""Dataset content hash: the cache key that invalidates results when any sample changes.

Hashes what defines a sample (id, image bytes, question, options, answer, meta) in order, and
nothing about where it was loaded from, so the same content in JSONL, TSV or HF form (with the
same image bytes) gets the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from benchc.data.sample import Sample

FINGERPRINT_VERSION = "benchc-data-1"


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


def sample_digest(sample: Sample) -> str:
    """sha256 of one sample's content."""
    h = hashlib.sha256()
    record = [sample.id, sample.question, list(sample.options), sample.answer, _canon(sample.meta)]
    h.update(json.dumps(record, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    h.update(hashlib.sha256(sample.image_bytes).digest())
    return h.hexdigest()


def fingerprint(samples: Iterable[Sample]) -> str:
    """Order-sensitive content hash of a dataset (first 16 hex digits of a sha256)."""
    h = hashlib.sha256(FINGERPRINT_VERSION.encode())
    for s in samples:
        h.update(bytes.fromhex(sample_digest(s)))
    return h.hexdigest()[:16]
