"""Bench-C sample selection (Eqs. 1-6) and the leave-one-selector-out check (Table I).

Layout: ``top1[selector, sample, corruption, severity]`` int option indices of the selector
models' top-1 predictions (F, Q, D, L); ``n_options`` (Q,); embeddings ``image_emb`` (Q, E_I)
and ``text_emb`` (Q, E_T).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "LosoRow",
    "Selection",
    "eligible",
    "gini_dispersion",
    "greedy_novelty",
    "jaccard",
    "kappa",
    "leave_one_selector_out",
    "select",
    "selector_dispersion",
]


def _agreements(top1: np.ndarray, n_options: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(agree, k)``: ``agree`` = sum_k count_k^2 (int) of each trajectory, i.e. the
    number of ordered severity pairs that agree; ``k`` broadcast to ``top1.shape[:-1]``."""
    top1 = np.asarray(top1)
    if top1.ndim < 1 or top1.shape[-1] < 1:
        raise ValueError(f"top1: expected (..., L) with L >= 1, got shape {top1.shape}")
    if not np.issubdtype(top1.dtype, np.integer):
        raise ValueError(f"top1: predictions must be integer option indices, got {top1.dtype}")
    k = np.broadcast_to(np.asarray(n_options), top1.shape[:-1])
    if not np.issubdtype(k.dtype, np.integer):
        raise ValueError(f"n_options: must be integers, got {k.dtype}")
    bad_k = np.argwhere(k < 2)
    if bad_k.size:
        idx = tuple(int(i) for i in bad_k[0])
        raise ValueError(f"n_options{list(idx)}: K={int(k[idx])}, need K >= 2")
    bad = np.argwhere((top1 < 0) | (top1 >= k[..., None]))
    if bad.size:
        idx = tuple(int(i) for i in bad[0])
        raise ValueError(
            f"top1{list(idx)}: option index {int(top1[idx])} out of range for K={int(k[idx[:-1]])}"
        )
    agree = (top1[..., :, None] == top1[..., None, :]).sum(axis=(-1, -2), dtype=np.int64)
    return agree, k.astype(np.int64)


def gini_dispersion(top1: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Normalised Gini impurity G (Eq. 1) of each severity trajectory (axis -1) of top-1 answers.

    ``top1`` (..., L) int in [0, K); ``n_options`` broadcastable to ``top1.shape[:-1]``.
    G = K/(K-1) (1 - sum_k pi_k^2) in [0, 1]; 0 iff every severity gives the same answer.
    """
    agree, k = _agreements(top1, n_options)
    n_sev = np.asarray(top1).shape[-1]
    # one division of exact integers: equal impurities give bit-equal floats
    g = (k * (n_sev * n_sev - agree)) / ((k - 1) * n_sev * n_sev)
    return np.clip(g, 0.0, 1.0)


def _selector_grid(top1: np.ndarray, n_options: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Validated (F, Q, D, L) top-1 predictions and (Q,) option counts."""
    top1 = np.asarray(top1)
    if top1.ndim != 4:
        raise ValueError(f"top1: expected (F, Q, D, L), got shape {top1.shape}")
    k = np.asarray(n_options)
    if k.shape != top1.shape[1:2]:
        raise ValueError(f"n_options: expected shape ({top1.shape[1]},), got {k.shape}")
    return top1, k


def selector_dispersion(top1: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Per selector and sample, G averaged over corruptions: (F, Q) from (F, Q, D, L)."""
    top1, k = _selector_grid(top1, n_options)
    return gini_dispersion(top1, k[None, :, None]).mean(axis=2)


def kappa(top1: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """Corruption-responsiveness kappa (Eq. 2): G averaged over corruptions and selectors, (Q,).

    Computed from integer counts, K sum_{f,d} (L^2 - sum_k c_k^2) / ((K-1) F D L^2), with a
    single float division: exactly tied kappas are bit-equal, so the first novelty pick and
    ``e > mean`` (Eq. 6) never hinge on summation-order rounding.
    """
    top1, k = _selector_grid(top1, n_options)
    agree, kb = _agreements(top1, k[None, :, None])
    f, _, d, n_sev = top1.shape
    spread = (n_sev * n_sev - agree).sum(axis=(0, 2), dtype=np.int64)  # (Q,)
    kq = kb[0, :, 0]
    return (kq * spread) / ((kq - 1) * (f * d * n_sev * n_sev))


def eligible(top1: np.ndarray, n_options: np.ndarray) -> np.ndarray:
    """A+ (Eq. 3): every selector's corruption-averaged dispersion is > 0; bool (Q,)."""
    return (selector_dispersion(top1, n_options) > 0).all(axis=0)


def _check_emb(emb: np.ndarray, n: int, name: str) -> np.ndarray:
    emb = np.asarray(emb, dtype=np.float64)
    if emb.ndim != 2 or emb.shape[0] != n:
        raise ValueError(f"{name}: expected ({n}, E), got shape {emb.shape}")
    bad = np.argwhere(~np.isfinite(emb))
    if bad.size:
        raise ValueError(f"{name}[{int(bad[0][0])}]: embedding has non-finite values")
    norm = np.linalg.norm(emb, axis=1)
    zero = np.nonzero(norm == 0)[0]
    if zero.size:
        raise ValueError(
            f"{name}[{int(zero[0])}]: zero embedding has no direction (cosine undefined)"
        )
    return emb / norm[:, None]


def greedy_novelty(
    image_emb: np.ndarray,
    text_emb: np.ndarray,
    kappa_scores: np.ndarray,
    pool: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Greedy semantic novelty over the pool (Eqs. 4-5).

    The first pick is the highest-kappa item (novelty 1, both similarities initialised to 0);
    then each step takes the item maximising nu_n = 1 - (cos(v_I, mu_I) + cos(v_T, mu_T)) / 2,
    where mu are the centroids of the already selected items' l2-normalised embeddings, and
    records nu at the moment it is taken. Ties go to the lowest index.

    Returns ``nu`` (Q,) (NaN outside the pool) and ``order`` (n_pool,) sample indices in
    selection order. Runs in O(n_pool^2) via the Gram matrix, no per-step matrix product.
    """
    k = np.asarray(kappa_scores, dtype=np.float64)
    q = k.shape[0]
    vi = _check_emb(image_emb, q, "image_emb")
    vt = _check_emb(text_emb, q, "text_emb")
    pool_mask = np.ones(q, dtype=bool) if pool is None else np.asarray(pool, dtype=bool)
    if pool_mask.shape != (q,):
        raise ValueError(f"pool: expected shape ({q},), got {pool_mask.shape}")
    idx = np.nonzero(pool_mask)[0]
    nu = np.full(q, np.nan)
    if idx.size == 0:
        return nu, idx
    gi = vi[idx] @ vi[idx].T
    gt = vt[idx] @ vt[idx].T
    m = idx.size
    taken = np.zeros(m, dtype=bool)
    dot_i = np.zeros(m)  # v_q . (sum of selected v)
    dot_t = np.zeros(m)
    sq_i = 0.0  # |sum of selected v|^2
    sq_t = 0.0
    order = np.empty(m, dtype=np.int64)
    first = int(np.argmax(k[idx]))
    for step in range(m):
        if step == 0:
            pick, value = first, 1.0
        else:
            cos_i = dot_i / np.sqrt(sq_i) if sq_i > 0 else np.zeros(m)
            cos_t = dot_t / np.sqrt(sq_t) if sq_t > 0 else np.zeros(m)
            score = np.where(taken, -np.inf, 1.0 - (cos_i + cos_t) / 2.0)
            pick = int(np.argmax(score))
            value = float(score[pick])
        taken[pick] = True
        order[step] = idx[pick]
        nu[idx[pick]] = value
        sq_i += 2.0 * dot_i[pick] + gi[pick, pick]
        sq_t += 2.0 * dot_t[pick] + gt[pick, pick]
        dot_i += gi[:, pick]
        dot_t += gt[:, pick]
    return nu, order


@dataclass(frozen=True)
class Selection:
    """Outcome of :func:`select`: ``kappa``, ``eligible`` (A+), ``novelty`` (NaN outside A+),
    ``e`` = kappa + nu (NaN outside A+), ``order`` (greedy order over A+), ``selected`` (Eq. 6)."""

    kappa: np.ndarray
    eligible: np.ndarray
    novelty: np.ndarray
    e: np.ndarray
    order: np.ndarray
    selected: np.ndarray


def select(
    top1: np.ndarray,
    n_options: np.ndarray,
    image_emb: np.ndarray,
    text_emb: np.ndarray,
    pool: np.ndarray | None = None,
) -> Selection:
    """The full Bench-C selection (Eqs. 1-6): kappa, A+, greedy novelty, keep e > mean_{A+} e.

    ``pool`` overrides the eligibility set (Table I's "fixed" variant keeps the original A+).
    """
    kap = kappa(top1, n_options)
    elig = eligible(top1, n_options) if pool is None else np.asarray(pool, dtype=bool)
    nu, order = greedy_novelty(image_emb, text_emb, kap, elig)
    e = np.where(elig, kap + np.nan_to_num(nu), np.nan)
    selected = np.zeros_like(elig)
    if elig.any():
        selected = elig & (np.nan_to_num(e, nan=-np.inf) > np.mean(e[elig]))
    return Selection(kap, elig, nu, e, order, selected)


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A & B| / |A | B| of two boolean masks; NaN when both are empty."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"jaccard: masks differ in shape {a.shape} vs {b.shape}")
    union = int((a | b).sum())
    return float((a & b).sum()) / union if union else float("nan")


@dataclass(frozen=True)
class LosoRow:
    """One Table I row: the selector removed, and JI / retained count against the full
    selection with the eligibility pool fixed and recomputed."""

    removed: int
    fixed_ji: float
    fixed_retained: int
    recomputed_ji: float
    recomputed_retained: int
    n_selected: int


def leave_one_selector_out(
    top1: np.ndarray, n_options: np.ndarray, image_emb: np.ndarray, text_emb: np.ndarray
) -> list[LosoRow]:
    """Table I: rerun :func:`select` without each selector in turn (needs F >= 2)."""
    top1 = np.asarray(top1)
    if top1.ndim != 4 or top1.shape[0] < 2:
        raise ValueError(f"top1: leave-one-out needs (F >= 2, Q, D, L), got shape {top1.shape}")
    full = select(top1, n_options, image_emb, text_emb)
    rows = []
    for f in range(top1.shape[0]):
        rest = np.delete(top1, f, axis=0)
        fixed = select(rest, n_options, image_emb, text_emb, pool=full.eligible)
        recomp = select(rest, n_options, image_emb, text_emb)
        rows.append(
            LosoRow(
                removed=f,
                fixed_ji=jaccard(full.selected, fixed.selected),
                fixed_retained=int((full.selected & fixed.selected).sum()),
                recomputed_ji=jaccard(full.selected, recomp.selected),
                recomputed_retained=int((full.selected & recomp.selected).sum()),
                n_selected=int(full.selected.sum()),
            )
        )
    return rows
