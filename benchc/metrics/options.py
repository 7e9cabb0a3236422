"""Option distributions from option logits (docs/spec.md §2) and the per-distribution terms S and C.

Every array here has the sample on axis 0 and the option on the last axis; anything in between
(conditions, corruptions, severities) is broadcast. A sample with K < K_max options is NaN-padded
on the right, so one array holds a whole grid; the mask keeps padding out of every sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from benchc.spec import CLEAN, MAX_OPTIONS, MIN_OPTIONS, OPTION_MASS_FLAG, condition_key

__all__ = [
    "UnansweredPairs",
    "alignment",
    "alignment_from_top",
    "confidence",
    "entropy_option_first",
    "infer_n_options",
    "low_option_mass",
    "normalized_entropy",
    "option_mask",
    "option_probs",
    "predictions",
    "probs_option_first",
    "require_answered",
    "to_option_first",
    "top_option_first",
    "validate_answers",
    "validate_option_logits",
]


#: The largest finite float32: larger float64 logits would become inf, then NaN probabilities.
F32_MAX = float(np.finfo(np.float32).max)


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
    non-finite logits inside a sample's K options, finite float64 logits beyond the float32
    range, or non-NaN values in its padding. ``skip``
    (shape of ``logits`` without the option axis) marks entries (invalid pairs) left unchecked.
    """
    logits = np.asarray(logits)
    if logits.ndim < 2:
        raise ValueError(
            f"{name}: expected (N, ..., K_max) option logits, got shape {logits.shape}"
        )
    if not np.issubdtype(logits.dtype, np.floating):
        raise ValueError(f"{name}: option logits must be floating point, got dtype {logits.dtype}")
    if logits.dtype.itemsize > 4:  # the softmax runs in float32 (docs/spec.md §2)
        big = np.abs(np.nan_to_num(logits, nan=0.0, posinf=0.0, neginf=0.0)) > F32_MAX
        if skip is not None:
            big &= ~np.asarray(skip, dtype=bool)[..., None]
        if big.any():
            idx = tuple(np.argwhere(big)[0])
            raise ValueError(
                f"{name}{_where(idx)}: option logit {float(logits[idx])!r} is beyond the float32 "
                f"range (|x| <= {F32_MAX:.4g}) the option softmax is computed in"
            )
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
    if skip is None and (n_options == k_max).all() and np.isfinite(logits).all():
        return n_options.astype(np.int64)  # fast path: no padding, nothing to locate
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
            f"{name}{_where(idx)}: option logit is {float(logits[idx])}; logits of the sample's "
            "K options must be finite"
        )
    if bad_pad.any():
        idx = tuple(np.argwhere(bad_pad)[0])
        raise ValueError(
            f"{name}{_where(idx)}: padding beyond sample {int(idx[0])}'s "
            f"K={int(n_options[idx[0]])} options must be NaN, got {float(logits[idx])}"
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


def to_option_first(a: np.ndarray) -> np.ndarray:
    """(N, ..., K) -> contiguous (K, N, ...). Reductions over a handful of options are an order
    of magnitude faster as elementwise operations between K contiguous slices."""
    return np.ascontiguousarray(np.moveaxis(np.asarray(a), -1, 0))


def probs_option_first(xt: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Softmax of option-first logits (K, N, ...) in float32; padding exactly 0, rows of all-NaN
    logits (skipped pairs) all NaN."""
    xt = np.asarray(xt, dtype=np.float32)
    k_max = xt.shape[0]
    k = np.asarray(n_options)
    if (k != k_max).any():
        mask = (np.arange(k_max)[:, None] < k[None, :]).reshape(
            (k_max, k.shape[0]) + (1,) * (xt.ndim - 2)
        )
        xt = np.where(mask, xt, np.float32(-np.inf))
    e = np.exp(xt - xt.max(axis=0))
    e /= e.sum(axis=0)
    return e


def entropy_option_first(pt: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """S(p) (Eq. 7) of option-first probabilities (K, N, ...), in the input precision,
    clipped to [0, 1]; NaN rows stay NaN."""
    # p log max(p, tiny) is exactly 0 at p = 0 (0 log 0 = 0) and needs no masking pass.
    t = pt * np.log(np.maximum(pt, np.finfo(pt.dtype).tiny))
    logk = np.log(np.asarray(n_options, dtype=pt.dtype)).reshape((-1,) + (1,) * (pt.ndim - 2))
    return np.minimum(np.maximum(-t.sum(axis=0) / logk, 0), 1)


def top_option_first(pt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(argmax, max) over option-first probabilities (K, N, ...); ties go to the lowest index.

    The loop runs over the K <= 26 options, not over samples or pairs."""
    m = pt.max(axis=0)
    idx = np.full(m.shape, pt.shape[0] - 1, dtype=np.int64)
    for j in range(pt.shape[0] - 2, -1, -1):
        idx[pt[j] == m] = j
    return idx, m


def option_probs(logits: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Softmax over each sample's K options in float32 (docs/spec.md §2), shape of ``logits``;
    padding becomes exactly 0.

    Inputs are assumed validated (see :func:`validate_option_logits`). Entries whose logits are
    all NaN (skipped invalid pairs) come out all NaN.
    """
    return np.moveaxis(probs_option_first(to_option_first(logits), n_options), 0, -1)


def normalized_entropy(p: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """S(p) = -sum p log p / log K with 0 log 0 = 0 (Eq. 7), clipped to [0, 1]."""
    return entropy_option_first(to_option_first(p), n_options)


def predictions(p: np.ndarray) -> np.ndarray:
    """Top-1 option index; ties go to the lowest index (numpy argmax convention)."""
    return top_option_first(to_option_first(p))[0]


def confidence(p: np.ndarray) -> np.ndarray:
    """max_k p_k."""
    return top_option_first(to_option_first(p))[1]


def alignment(p: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """C(p, y) = |1{argmax p = y} - max p| (Eq. 9), in [0, 1]."""
    pred, conf = top_option_first(to_option_first(p))
    return alignment_from_top(pred, conf, answers)


def alignment_from_top(pred: np.ndarray, conf: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """C from precomputed top-1 index and confidence; ``answers`` (N,) broadcast over the rest."""
    y = np.asarray(answers).reshape((-1,) + (1,) * (pred.ndim - 1))
    return np.abs((pred == y).astype(conf.dtype) - conf)


class UnansweredPairs(ValueError):
    """Pairs with no option distribution at all (docs/spec.md §3: a sampling proxy's query none of
    whose replies named an option, N_valid = 0)."""


def require_answered(
    clean: np.ndarray,
    cube: np.ndarray,
    n_options: np.ndarray,
    ids: Sequence[str],
    corruptions: Sequence[str],
    severities: Sequence[int],
) -> None:
    """Raise :class:`UnansweredPairs` naming the (sample id, condition) pairs whose every one of
    the sample's K option logits is NaN, over the clean (N, K_max) and corrupted (N, D, L, K_max)
    logits of ``corruptions`` x ``severities``.

    Such a pair is invalid (docs/spec.md §3); the figures do not exclude invalid pairs yet, so
    a caller stops with this message, which names samples and conditions, instead of the
    metrics layer's "option logit is nan", which names array indices."""
    logits = {CLEAN: np.asarray(clean)}
    for d, corruption in enumerate(corruptions):
        for s, severity in enumerate(severities):
            logits[condition_key(corruption, severity)] = np.asarray(cube)[:, d, s]
    n_options = np.asarray(n_options)
    bad: list[tuple[str, str]] = []
    for key, arr in logits.items():
        within = option_mask(n_options, arr.shape[-1])
        rows = np.flatnonzero((np.isnan(arr) | ~within).all(axis=-1))
        bad += [(str(ids[i]), key) for i in rows]
    if not bad:
        return
    total = len(n_options) * len(logits)
    shown = ", ".join(f"sample {sid!r} under {key}" for sid, key in bad[:5])
    more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
    raise UnansweredPairs(
        f"{len(bad)} of {total} (sample, condition) pairs have no option distribution: "
        f"{shown}{more}. Every option logit of such a pair is NaN, which is what a sampling "
        "proxy stores when none of a query's sampled replies named an option (N_valid = 0, "
        "docs/spec.md §3): the model answered those prompts with no option letter or text. "
        "An invalid pair is not excluded from the figures yet (docs/spec.md §3, known "
        "departure), so they cannot be computed."
    )


def low_option_mass(option_mass: np.ndarray, threshold: float = OPTION_MASS_FLAG) -> np.ndarray:
    """Flag (N,) samples whose letters carry < ``threshold`` of the full-vocabulary mass at the
    answer position (docs/spec.md §2): the model is not answering with a letter there."""
    m = np.asarray(option_mass, dtype=np.float64)
    bad = np.nonzero(~((m >= 0) & (m <= 1 + 1e-6)))[0]
    if bad.size:
        raise ValueError(f"option_mass[{int(bad[0])}]: {float(m[bad[0]])} is not a probability")
    return m < threshold
