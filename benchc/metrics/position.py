"""Option order as a structural axis (docs/spec.md §4, option order): does the model answer by
content or by position?

Inputs, one condition at a time: ``probs`` (N, R, K_max), the option probabilities by
*position* of each sample under each of its rotations (a rotation slot a sample does not use is
all NaN; K < K_max is NaN-padded, :mod:`benchc.metrics.options`); ``offsets`` (N, R), the
rotation of each slot (-1: unused, :mod:`benchc.data.rotations`); ``answers`` (N,), the correct
option's index in the given order; ``n_options`` (N,).

* **circular accuracy**: the share of samples right under every rotation scored (VLMEvalKit's
  CircularEval); never above the accuracy under any one of those orders.
* **position preference**: how much the chosen *position* stays put while the content moves.
  Per sample, the most frequent chosen position's share over its m rotations, rescaled so that
  a model answering by content (the chosen position follows the content: m distinct positions)
  scores 0 and one answering by position alone (the same position every time) scores 1.
* **order interaction**: position preference on a corrupted condition minus on clean, paired
  over samples: does corruption make the model fall back on position?

Every figure depends on the *set* of orders scored, not on which of them is called the first.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "accuracy_by_position",
    "chosen",
    "circular_accuracy",
    "circular_correct",
    "order_interaction",
    "order_pairs",
    "position_preference",
    "position_spread",
    "rotation_probs",
]


def _used(offsets: np.ndarray) -> np.ndarray:
    used = np.asarray(offsets) >= 0
    if (used.sum(axis=1) < 2).any():
        bad = int(np.nonzero(used.sum(axis=1) < 2)[0][0])
        raise ValueError(f"sample {bad}: option order needs >= 2 rotations, got {used[bad].sum()}")
    return used


def chosen(probs: np.ndarray, offsets: np.ndarray, n_options: np.ndarray) -> tuple[np.ndarray, ...]:
    """(position, content) chosen under each rotation slot, (N, R) each, -1 where unused: the
    top option by position (ties to the lowest, as :func:`benchc.metrics.options.predictions`)
    and the content shown there, ``(position + r) mod K``."""
    p = np.nan_to_num(np.asarray(probs, dtype=np.float64), nan=-np.inf)
    position = np.argmax(p, axis=-1)
    k = np.asarray(n_options)[:, None]
    offsets = np.asarray(offsets)
    used = _used(offsets)
    content = (position + offsets) % k
    return np.where(used, position, -1), np.where(used, content, -1)


def circular_correct(
    probs: np.ndarray, offsets: np.ndarray, answers: np.ndarray, n_options: np.ndarray
) -> np.ndarray:
    """(N,) bool: the sample is answered right under every rotation it was scored under."""
    _, content = chosen(probs, offsets, n_options)
    used = np.asarray(offsets) >= 0
    right = content == np.asarray(answers)[:, None]
    return np.where(used, right, True).all(axis=1)


def circular_accuracy(
    probs: np.ndarray, offsets: np.ndarray, answers: np.ndarray, n_options: np.ndarray
) -> float:
    """The share of samples right under every rotation scored."""
    return float(circular_correct(probs, offsets, answers, n_options).mean())


def position_spread(probs: np.ndarray, offsets: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """(N,) in [0, 1]: per sample, ``(s - 1/m) / (1 - 1/m)`` where ``s`` is the most frequent
    chosen position's share over the sample's ``m`` rotations: 0 when every rotation's choice
    sits at another position (the content decides), 1 when all sit at one (the position does)."""
    position, _ = chosen(probs, offsets, n_options)
    used = np.asarray(offsets) >= 0
    m = used.sum(axis=1)
    k_max = np.asarray(probs).shape[-1]
    counts = np.stack([((position == j) & used).sum(axis=1) for j in range(k_max)], axis=1)
    share = counts.max(axis=1) / m
    return (share - 1.0 / m) / (1.0 - 1.0 / m)


def position_preference(probs: np.ndarray, offsets: np.ndarray, n_options: np.ndarray) -> float:
    """The mean of :func:`position_spread` over samples."""
    return float(position_spread(probs, offsets, n_options).mean())


def order_interaction(
    clean: np.ndarray, corrupted: np.ndarray, offsets: np.ndarray, n_options: np.ndarray
) -> float:
    """Position preference under corruption minus on the clean image, paired over the same
    samples and rotations (> 0: corruption makes the model answer more by position)."""
    return float(
        (position_spread(corrupted, offsets, n_options)
         - position_spread(clean, offsets, n_options)).mean()
    )  # fmt: skip


def accuracy_by_position(
    probs: np.ndarray, offsets: np.ndarray, answers: np.ndarray, n_options: np.ndarray
) -> np.ndarray:
    """(K_max,) accuracy over (sample, rotation) pairs by the position the correct option was
    shown at (NaN where no pair put it there): a model that prefers a position is right far more
    often when the answer happens to sit there."""
    _, content = chosen(probs, offsets, n_options)
    offsets = np.asarray(offsets)
    used = offsets >= 0
    answers = np.asarray(answers)[:, None]
    where = (answers - offsets) % np.asarray(n_options)[:, None]
    right = content == answers
    k_max = np.asarray(probs).shape[-1]
    out = np.full(k_max, np.nan)
    for j in range(k_max):
        at = used & (where == j)
        if at.any():
            out[j] = right[at].mean()
    return out


def order_pairs(
    given: np.ndarray,
    rotated: np.ndarray,
    offsets: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (sample, condition) entry, from option *logits*: ``given`` (M, K_max) in the given
    order (rotation 0: what every other figure scores), ``rotated`` (M, R_max - 1, K_max) under
    the sample's other rotations (an entry whose rotations were not scored is all NaN),
    ``offsets`` (M, R_max) (rotation 0 first, -1 unused). Returns ``scored`` (M,) bool,
    ``circular`` (M,) bool (:func:`circular_correct`) and ``spread`` (M,) float
    (:func:`position_spread`), False / 0 where not scored."""
    given = np.asarray(given, dtype=np.float32)
    rotated = np.asarray(rotated, dtype=np.float32)
    offsets = np.asarray(offsets)
    m, k_max = given.shape
    if (
        rotated.shape[0] != m
        or rotated.shape[-1] != k_max
        or offsets.shape != (m, rotated.shape[1] + 1)
    ):
        raise ValueError(
            f"order_pairs: given {given.shape}, rotated {rotated.shape} and offsets "
            f"{offsets.shape} do not line up as (M, K), (M, R - 1, K), (M, R)"
        )
    scored = ~np.isnan(rotated[:, 0, 0]) if rotated.shape[1] else np.zeros(m, dtype=bool)
    circular = np.zeros(m, dtype=bool)
    spread = np.zeros(m, dtype=np.float64)
    if scored.any():
        k = np.asarray(n_options)[scored]
        probs = rotation_probs(given[scored], rotated[scored], offsets[scored], k)
        y = np.asarray(answers)[scored]
        circular[scored] = circular_correct(probs, offsets[scored], y, k)
        spread[scored] = position_spread(probs, offsets[scored], k)
    return scored, circular, spread


def rotation_probs(
    given: np.ndarray, rotated: np.ndarray, offsets: np.ndarray, n_options: np.ndarray
) -> np.ndarray:
    """(M, R_max, K_max) option probabilities by position under each rotation slot (rotation
    0 from ``given`` (M, K_max) logits, the others from ``rotated`` (M, R_max - 1, K_max)), in
    float32 like the grid's, all NaN in unused slots (``offsets`` -1)."""
    from benchc.metrics.options import option_probs

    given = np.asarray(given, dtype=np.float32)  # the grid's own precision: its argmax ties
    logits = np.concatenate([given[:, None], np.asarray(rotated, dtype=np.float32)], axis=1)
    r, k_max = logits.shape[1], logits.shape[2]
    k = np.repeat(np.asarray(n_options), r)
    probs = option_probs(logits.reshape(-1, k_max), k).reshape(-1, r, k_max)
    return np.where((np.asarray(offsets) >= 0)[..., None], probs, np.nan)
