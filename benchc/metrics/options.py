"""Option distributions from option logits (SPEC section 2) and the per-distribution terms S and C.

Every array here has the sample on axis 0 and the option on the last axis; anything in between
(conditions, corruptions, severities) is broadcast. A sample with K < K_max options is NaN-padded
on the right, so one array holds a whole grid; the mask keeps padding out of every sum.
"""

from __future__ import annotations

import numpy as np

from benchc.spec import MAX_OPTIONS, MIN_OPTIONS

__all__ = [
    "alignment",
    "confidence",
    "infer_n_options",
    "normalized_entropy",
    "option_mask",
    "option_probs",
    "predictions",
    "validate_answers",
    "validate_option_logits",
]


def _where(idx: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def infer_n_options(logits: np.ndarray, *, name: str = "logits") -> np.ndarray:
    """Per-sample K read from the NaN padding of ``logits`` (N, ..., K_max): the finite prefix
    length, which must be the same at every condition of a sample."""
    logits = np.asarray(logits)
    if logits.ndim < 2:
        raise ValueError(
            f"{name}: expected (N, ..., K_max) option logits, got shape {logits.shape}"
        )
    finite = ~np.isnan(logits)
    k = finite.sum(axis=-1)
    k0 = k.reshape(k.shape[0], -1)
    bad = np.nonzero((k0 != k0[:, :1]).any(axis=1))[0]
    if bad.size:
        raise ValueError(
            f"{name}: sample {int(bad[0])} has a different number of non-NaN options across "
            "conditions; pass n_options explicitly or fix the padding"
        )
    return k0[:, 0].astype(np.int64)


def option_mask(n_options: np.ndarray, k_max: int) -> np.ndarray:
    """Boolean (N, K_max): True where option k exists for sample n."""
    return np.arange(k_max) < np.asarray(n_options)[:, None]


def validate_option_logits(
    logits: np.ndarray,
    n_options: np.ndarray | None = None,
    *,
    name: str = "logits",
    skip: np.ndarray | None = None,
) -> np.ndarray:
    """Check an (N, ..., K_max) option-logit array and return the per-sample K as int64 (N,).

    Raises ``ValueError`` naming the first offending index for: wrong rank, K < 2 or K > 26,
    non-finite logits inside a sample's K options, or non-NaN values in its padding. ``skip``
    (shape of ``logits`` without the option axis) marks entries (invalid pairs) left unchecked.
    """
    logits = np.asarray(logits)
    if logits.ndim < 2:
        raise ValueError(
            f"{name}: expected (N, ..., K_max) option logits, got shape {logits.shape}"
        )
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"{name}: option logits must be floating point, got dtype {logits.dtype}")
    n, k_max = logits.shape[0], logits.shape[-1]
    if n_options is None:
        n_options = infer_n_options(
            logits if skip is None else np.where(skip[..., None], np.nan, logits), name=name
        )
    n_options = np.asarray(n_options)
    if n_options.shape != (n,):
        raise ValueError(f"{name}: n_options must have shape ({n},), got {n_options.shape}")
    if not np.issubdtype(n_options.dtype, np.integer):
        raise ValueError(f"{name}: n_options must be integers, got dtype {n_options.dtype}")
    bad = np.nonzero((n_options < MIN_OPTIONS) | (n_options > min(MAX_OPTIONS, k_max)))[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}: sample {i} has K={int(n_options[i])} options; need "
            f"{MIN_OPTIONS} <= K <= {min(MAX_OPTIONS, k_max)} (K_max={k_max})"
        )
    mask = option_mask(n_options, k_max).reshape((n,) + (1,) * (logits.ndim - 2) + (k_max,))
    bad_in = mask & ~np.isfinite(logits)
    bad_pad = ~mask & ~np.isnan(logits)
    if skip is not None:
        keep = ~np.asarray(skip, dtype=bool)[..., None]
        bad_in &= keep
        bad_pad &= keep
    if bad_in.any():
        idx = tuple(np.argwhere(bad_in)[0])
        raise ValueError(
            f"{name}{_where(idx)}: option logit is {logits[idx]!r}; logits of the sample's "
            "K options must be finite"
        )
    if bad_pad.any():
        idx = tuple(np.argwhere(bad_pad)[0])
        raise ValueError(
            f"{name}{_where(idx)}: padding beyond sample {int(idx[0])}'s "
            f"K={int(n_options[idx[0]])} options must be NaN, got {logits[idx]!r}"
        )
    return n_options.astype(np.int64)


def validate_answers(
    answers: np.ndarray, n_options: np.ndarray, *, name: str = "answers"
) -> np.ndarray:
    """Check ground-truth option indices (N,) against per-sample K; returns them as int64."""
    answers = np.asarray(answers)
    n_options = np.asarray(n_options)
    if answers.shape != n_options.shape:
        raise ValueError(f"{name}: expected shape {n_options.shape}, got {answers.shape}")
    if not np.issubdtype(answers.dtype, np.integer):
        raise ValueError(f"{name}: answer indices must be integers, got dtype {answers.dtype}")
    bad = np.nonzero((answers < 0) | (answers >= n_options))[0]
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}]: answer index {int(answers[i])} out of range for K={int(n_options[i])}"
        )
    return answers.astype(np.int64)


def option_probs(logits: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Softmax over each sample's K options in float32 (SPEC 2); padding becomes exactly 0.

    Inputs are assumed validated (see :func:`validate_option_logits`). Entries whose logits are
    all NaN (skipped invalid pairs) come out all NaN.
    """
    x = np.asarray(logits, dtype=np.float32)
    n, k_max = x.shape[0], x.shape[-1]
    mask = option_mask(n_options, k_max).reshape((n,) + (1,) * (x.ndim - 2) + (k_max,))
    x = np.where(mask, x, np.float32(-np.inf))
    m = np.max(x, axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=-1, keepdims=True)


def normalized_entropy(p: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """S(p) = -sum p log p / log K with 0 log 0 = 0 (Eq. 7); float64, clipped to [0, 1]."""
    p = np.asarray(p, dtype=np.float64)
    logk = np.log(np.asarray(n_options, dtype=np.float64)).reshape((-1,) + (1,) * (p.ndim - 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
    h = np.clip(-np.sum(plogp, axis=-1) / logk, 0.0, 1.0)
    # Option 0 always exists (K >= 2), so a NaN there marks a skipped pair: keep it undefined.
    return np.where(np.isnan(p[..., 0]), np.nan, h)


def predictions(p: np.ndarray) -> np.ndarray:
    """Top-1 option index; ties go to the lowest index (numpy argmax convention)."""
    return np.argmax(np.nan_to_num(np.asarray(p), nan=-1.0), axis=-1)


def confidence(p: np.ndarray) -> np.ndarray:
    """max_k p_k as float64."""
    return np.max(np.asarray(p, dtype=np.float64), axis=-1)


def alignment(p: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """C(p, y) = |1{argmax p = y} - max p| (Eq. 9); float64 in [0, 1]."""
    p = np.asarray(p)
    y = np.asarray(answers).reshape((-1,) + (1,) * (p.ndim - 2))
    correct = predictions(p) == y
    return np.abs(correct.astype(np.float64) - confidence(p))
