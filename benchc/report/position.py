"""Accuracy by the position the correct option was shown at (docs/spec.md §4, option order),
clean against corrupted: the numbers of the report's "accuracy by position" figure.

A stored run scores each sample under cyclic rotations of its options (``StoredRun.order``):
rotation 0 is the condition's own stored logits, the others are ``order.<condition>``. Position
``j`` under rotation ``r`` shows content ``(j + r) mod K``, so each (sample, rotation) pair puts
the correct option at one position; :func:`benchc.metrics.position.accuracy_by_position` is the
accuracy over the pairs that put it at each position. "Corrupted" pools every rotated corrupted
condition of the run (every key of ``StoredRun.order`` but clean).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchc import spec
from benchc.metrics.position import accuracy_by_position, rotation_probs
from benchc.results.reader import StoredRun

__all__ = ["position_accuracy", "position_labels"]


def position_labels(k: int) -> list[str]:
    """The option letters of ``k`` positions: A, B, C, ..."""
    return [chr(ord("A") + j) if j < 26 else str(j + 1) for j in range(k)]


def _given(run: StoredRun, key: str) -> np.ndarray | None:
    """Condition ``key``'s stored logits in the given order (rotation 0), (N, K_max)."""
    if key == spec.CLEAN:
        return run.clean_logits
    if run.logits is None or key not in run.cells:
        return None
    i = run.cells.index(key)
    n_sev = len(run.severities)
    return run.logits[:, i // n_sev, i % n_sev]


def _pairs(
    run: StoredRun, key: str
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Condition ``key``'s (probs (M, R, K) by position, offsets (M, R), answers, n_options)
    over the samples scored under >= 2 rotations with every used slot answered; None if none."""
    given, stored = _given(run, key), run.order.get(key)
    if given is None or stored is None:
        return None
    rotated = np.asarray(stored["option_logits"], dtype=np.float32)
    offsets = np.asarray(stored["offsets"], dtype=np.int64)
    given = np.asarray(given, dtype=np.float32)  # the grid's own precision: its argmax ties
    n, k_max = given.shape
    if rotated.shape != (n, offsets.shape[1] - 1, k_max) or offsets.shape[0] != n:
        return None
    used = offsets >= 0
    answered = np.isfinite(np.concatenate([given[:, None], rotated], axis=1)).any(axis=-1)
    keep = (used.sum(axis=1) >= 2) & (answered | ~used).all(axis=1)
    if not keep.any():
        return None
    offsets, k = offsets[keep], np.asarray(run.n_options)[keep]
    probs = rotation_probs(given[keep], rotated[keep], offsets, k)
    return probs, offsets, np.asarray(run.answers)[keep], k


def _side(run: StoredRun, keys: list[str]) -> tuple[list[float | None], list[int]] | None:
    """Accuracy and (sample, rotation) pair count by position, pooled over conditions ``keys``."""
    got = [p for p in (_pairs(run, key) for key in keys) if p is not None]
    if not got:
        return None
    probs, offsets, answers, k = (np.concatenate(parts) for parts in zip(*got, strict=True))
    acc = accuracy_by_position(probs, offsets, answers, k)
    where = (answers[:, None] - offsets) % k[:, None]
    used = offsets >= 0
    counts = [int((used & (where == j)).sum()) for j in range(acc.shape[0])]
    return [float(x) if math.isfinite(x) else None for x in acc], counts


def position_accuracy(run: StoredRun) -> dict[str, Any] | None:
    """``report.json`` ``series[].accuracy_by_position``: ``positions`` (``["A", "B", ...]``,
    K_max of them), ``clean`` and ``corrupted`` (accuracy by the position the correct option
    was shown at; ``null`` where no pair put it there, a side ``null`` when not rotated),
    ``n_clean`` and ``n_corrupted`` ((sample, rotation) pairs per position) and
    ``corrupted_conditions`` (the rotated corrupted conditions pooled). None when the run
    stores no rotations (a run before option order was scored)."""
    order = getattr(run, "order", None) or {}
    if not order or run.clean_logits is None:
        return None
    corrupted_keys = [key for key in order if key != spec.CLEAN]
    clean = _side(run, [spec.CLEAN]) if spec.CLEAN in order else None
    corrupted = _side(run, corrupted_keys) if corrupted_keys else None
    if clean is None and corrupted is None:
        return None
    k_max = int(run.clean_logits.shape[-1])
    return {
        "positions": position_labels(k_max),
        "clean": None if clean is None else clean[0],
        "corrupted": None if corrupted is None else corrupted[0],
        "n_clean": None if clean is None else clean[1],
        "n_corrupted": None if corrupted is None else corrupted[1],
        "corrupted_conditions": [k for k in corrupted_keys if _given(run, k) is not None],
    }
