"""VSI metrics (docs/spec.md §5): KL of the next-token distribution under a localised blur, the
insensitive fraction, argmax change rate, and the encoder-LLM gap from a grouped linear probe.

Layouts: full log-distributions ``logp`` (N, V); top-k ``ids`` (N, k) int and ``logp`` (N, k);
pooled vision features (N, F) for the clean and the perturbed view of each image.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
from scipy.special import logsumexp, rel_entr

from benchc.metrics.figures import evaluate
from benchc.spec import VSI_INSENSITIVE, VSI_PAPER_SEED, VSI_TOPK

__all__ = [
    "GapResult",
    "ProbeResult",
    "VSIDistribution",
    "argmax_change_rate",
    "encoder_llm_gap",
    "gap_terms",
    "insensitive_fraction",
    "low_pool",
    "matched_control",
    "pool_probe",
    "probe_accuracy",
    "vsi_aligned",
    "vsi_distribution",
    "vsi_full",
    "vsi_topk",
]

_NORM_TOL = 1e-3


def _check_logp(logp: np.ndarray, name: str, offset: int = 0) -> np.ndarray:
    """Validate (rows, V) log-probabilities; ``offset`` is the first row's index for messages."""
    logp = np.asarray(logp, dtype=np.float64)
    bad = np.argwhere(np.isnan(logp) | (logp == np.inf))
    if bad.size:
        i, j = (int(v) for v in bad[0])
        raise ValueError(f"{name}[{i + offset}, {j}]: log-probability is {float(logp[i, j])}")
    lse = logsumexp(logp, axis=1)
    rows = np.nonzero(~(np.abs(lse) <= _NORM_TOL))[0]
    if rows.size:
        i = int(rows[0])
        raise ValueError(
            f"{name}[{i + offset}]: not a normalised log-distribution "
            f"(logsumexp = {lse[i]:+.3g} != 0)"
        )
    return logp


def vsi_full(
    logp_clean: np.ndarray, logp_perturbed: np.ndarray, chunk_rows: int = 64
) -> np.ndarray:
    """VSI = KL(f(.|x, q) || f(.|x_sigma, q)) per row over the full vocabulary (float64, >= 0).

    Both inputs are (N, V) normalised log-probabilities; -inf marks a zero-probability token.
    Rows are processed ``chunk_rows`` at a time so a 150k-token vocabulary stays in bounded
    memory.
    """
    a, b = np.asarray(logp_clean), np.asarray(logp_perturbed)
    if a.shape != b.shape:
        raise ValueError(f"logp_perturbed: shape {b.shape} differs from logp_clean {a.shape}")
    if a.ndim != 2:
        raise ValueError(f"logp_clean: expected (N, V) log-probabilities, got shape {a.shape}")
    out = np.empty(a.shape[0])
    for start in range(0, a.shape[0], chunk_rows):
        rows = slice(start, start + chunk_rows)
        p = _check_logp(a[rows], "logp_clean", start)
        q = _check_logp(b[rows], "logp_perturbed", start)
        out[rows] = rel_entr(np.exp(p), np.exp(q)).sum(axis=1)
    return np.maximum(out, 0.0)


def _union(
    ids: list[np.ndarray], valid: list[np.ndarray] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """U per row: both top-k id lists sorted together, and a mask of U's distinct entries
    (entries not ``valid``, a side's padding, belong to no support)."""
    cat = np.concatenate(ids, axis=1)
    ok = np.ones(cat.shape, bool) if valid is None else np.concatenate(valid, axis=1)
    order = np.lexsort((~ok, cat), axis=1)  # by id; of equal ids, a valid entry first
    union = np.take_along_axis(cat, order, axis=1)
    keep = np.take_along_axis(ok, order, axis=1)
    keep[:, 1:] &= union[:, 1:] != union[:, :-1]
    return union, keep


def _kl_on_union(p: np.ndarray, q: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """KL(p || q) per row over the union entries ``keep``, each side renormalised over U."""
    p, q = np.where(keep, p, 0.0), np.where(keep, q, 0.0)
    p /= p.sum(axis=1, keepdims=True)
    q /= q.sum(axis=1, keepdims=True)
    return np.maximum(rel_entr(p, q).sum(axis=1), 0.0)


def _check_topk(ids: list[np.ndarray], lps: list[np.ndarray]) -> list[np.ndarray]:
    """Validate both sides' (N, k) top-k lists; which entries are tokens (padding: -inf)."""
    out = []
    for i, lp, nm in zip(ids, lps, ("clean", "perturbed"), strict=True):
        if i.ndim != 2 or i.shape != lp.shape or i.shape[0] != ids[0].shape[0]:
            raise ValueError(
                f"top-k {nm}: ids {i.shape} and logp {lp.shape} must both be (N, k), same N"
            )
        bad = np.argwhere(~np.isfinite(lp) & ~(lp == -np.inf))
        if bad.size:
            r, c = (int(v) for v in bad[0])
            raise ValueError(f"logp_{nm}[{r}, {c}]: log-probability is {float(lp[r, c])}")
        dup = np.nonzero((np.diff(np.sort(i, axis=1), axis=1) == 0).any(axis=1))[0]
        if dup.size:
            raise ValueError(f"ids_{nm}[{int(dup[0])}]: top-k token ids repeat")
        out.append(lp > -np.inf)
    return out


def vsi_aligned(
    logp_clean: np.ndarray,
    logp_perturbed: np.ndarray,
    k: int = VSI_TOPK,
    *,
    ids_clean: np.ndarray | None = None,
    ids_perturbed: np.ndarray | None = None,
) -> np.ndarray:
    """White-box ``vsi_top50`` (docs/spec.md §5): U = the union of both passes' top-``k`` token
    ids; each side's *own* probabilities of every token in U, read from its full
    distribution (no floor), renormalised over U; KL on U. ``ids_*``: top-k ids already known
    (the backend's), else taken from the distributions."""
    a = np.asarray(logp_clean, dtype=np.float64)
    b = np.asarray(logp_perturbed, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"logp_clean {a.shape} and logp_perturbed {b.shape}: expected (N, V)")
    ids = [
        np.argsort(-x, axis=1, kind="stable")[:, :k] if given is None else np.asarray(given)
        for x, given in ((a, ids_clean), (b, ids_perturbed))
    ]
    union, keep = _union(ids)
    at = np.where(keep, union, 0)
    p = np.exp(np.take_along_axis(a, at, axis=1))
    q = np.exp(np.take_along_axis(b, at, axis=1))
    return _kl_on_union(p, q, keep)


def _estimated(
    union: np.ndarray, ids: np.ndarray, logp: np.ndarray, valid: np.ndarray
) -> np.ndarray:
    """A side's probability of each union token: its returned one, else its smallest returned
    probability (an upper bound for any token outside its top k)."""
    match = (union[:, :, None] == ids[:, None, :]) & valid[:, None, :]
    prob = np.exp(logp)
    smallest = np.where(valid, prob, np.inf).min(axis=1, keepdims=True)
    known = (match * prob[:, None, :]).sum(axis=2)
    return np.where(match.any(axis=2), known, smallest)


def vsi_topk(
    ids_clean: np.ndarray,
    logp_clean: np.ndarray,
    ids_perturbed: np.ndarray,
    logp_perturbed: np.ndarray,
) -> np.ndarray:
    """``vsi_top<k>`` (estimated) of a server that returns only each pass's top k
    (docs/spec.md §5): the aligned support of :func:`vsi_aligned`, where a side's probability
    of a token outside its own top k (unknown) is estimated by that side's smallest returned
    probability. Equal to the white-box value wherever both sides return every token of U.
    Padding entries (log-probability -inf) are no token."""
    lps = [np.asarray(logp_clean, dtype=np.float64), np.asarray(logp_perturbed, dtype=np.float64)]
    ids = [np.asarray(ids_clean), np.asarray(ids_perturbed)]
    valid = _check_topk(ids, lps)
    union, keep = _union(ids, valid)
    p = _estimated(union, ids[0], lps[0], valid[0])
    q = _estimated(union, ids[1], lps[1], valid[1])
    return _kl_on_union(p, q, keep)


def insensitive_fraction(vsi: np.ndarray, threshold: float = VSI_INSENSITIVE) -> float:
    """Share of samples with VSI < threshold; NaN for an empty set."""
    v = np.asarray(vsi, dtype=np.float64)
    if np.isnan(v).any():
        raise ValueError(f"vsi[{int(np.nonzero(np.isnan(v))[0][0])}]: VSI is NaN")
    return float(np.mean(v < threshold)) if v.size else float("nan")


def argmax_change_rate(top1_clean: np.ndarray, top1_perturbed: np.ndarray) -> float:
    """Share of samples whose argmax token changes under the perturbation; NaN when empty."""
    a, b = np.asarray(top1_clean), np.asarray(top1_perturbed)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"argmax ids must both be (N,), got {a.shape} and {b.shape}")
    return float(np.mean(a != b)) if a.size else float("nan")


@dataclass(frozen=True)
class ProbeResult:
    """Grouped k-fold result of the perturbed-vs-clean linear probe.

    ``correct`` (N,): per image, the share of its two views (clean, perturbed) that the probe
    classified right when that image sat in the test fold (0, 0.5 or 1). Per-image values are
    what lets a gate bootstrap the probe's accuracy over samples without refitting it.
    """

    accuracy: float
    fold_accuracies: np.ndarray
    correct: np.ndarray

    @property
    def fold_std(self) -> float:
        return float(np.std(self.fold_accuracies))


def probe_accuracy(
    features_clean: np.ndarray,
    features_perturbed: np.ndarray,
    n_splits: int = 5,
    *,
    image_ids: np.ndarray | None = None,
) -> ProbeResult:
    """L2 logistic regression (C = 1) on l2-normalised features, clean (0) vs perturbed (1),
    ``n_splits``-fold cross-validation grouped by image so both views share a fold
    (docs/spec.md §5).
    ``image_ids`` (one per row) groups repeated rows too, as a bootstrap resample has them: a
    copy of a training image in the test fold would let the probe recall it, not generalise.
    ``accuracy`` pools every held-out view. Deterministic: GroupKFold without shuffling and
    lbfgs need no random state.
    """
    fc = np.asarray(features_clean, dtype=np.float64)
    fp = np.asarray(features_perturbed, dtype=np.float64)
    if fc.ndim != 2 or fc.shape != fp.shape:
        raise ValueError(
            f"probe features must both be (N, F) with equal shapes, got {fc.shape} and {fp.shape}"
        )
    n = fc.shape[0]
    ids = np.arange(n) if image_ids is None else np.asarray(image_ids)
    if ids.shape != (n,):
        raise ValueError(f"image_ids must be ({n},), got {ids.shape}")
    if np.unique(ids).size < n_splits:
        raise ValueError(
            f"probe: {np.unique(ids).size} distinct images cannot fill {n_splits} grouped folds"
        )
    for arr, nm in ((fc, "features_clean"), (fp, "features_perturbed")):
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            raise ValueError(f"{nm}[{int(bad[0][0])}]: feature vector has non-finite values")
    # here, not at the top: scikit-learn costs every run's start 1.3 s, and only the probe uses it
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GroupKFold
    from sklearn.preprocessing import normalize

    x = normalize(np.concatenate([fc, fp]))
    y = np.repeat([0, 1], n)
    groups = np.tile(ids, 2)
    hit = np.zeros(2 * n)
    folds = []
    for train, test in GroupKFold(n_splits=n_splits).split(x, y, groups):
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(x[train], y[train])
        hit[test] = clf.predict(x[test]) == y[test]
        folds.append(float(hit[test].mean()))
    correct = (hit[:n] + hit[n:]) / 2.0
    return ProbeResult(float(correct.mean()), np.asarray(folds), correct)


@dataclass(frozen=True)
class VSIDistribution:
    """VSI Table 1 for one perturbation variant: the median, the shares below 0.01 and 0.05,
    Hartigan's dip test p-value (unimodality) and the silhouette of a two-cluster split."""

    n: int
    median: float
    below_001: float
    below_005: float
    dip_p: float
    silhouette: float


def vsi_distribution(vsi: np.ndarray) -> VSIDistribution:
    """Table 1 statistics of per-sample VSI. The dip test (``diptest``, table-interpolated p, so
    deterministic) and the silhouette run on log10 VSI (floored at 1e-12): VSI spans orders of
    magnitude, and the paper's heavy left tail is a shape in log space. The silhouette is that
    of 1-D 2-means (scikit-learn ``KMeans``, 10 starts, seed 42); NaN below 3 samples or with
    a single distinct value."""
    import diptest
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    v = np.asarray(vsi, dtype=np.float64)
    if v.ndim != 1 or not v.size:
        raise ValueError(f"vsi: expected a non-empty (N,) array, got shape {v.shape}")
    x = np.log10(np.maximum(v, 1e-12))
    dip_p = sil = float("nan")
    if v.size >= 4 and np.unique(x).size > 2:
        dip_p = float(diptest.diptest(x)[1])
        labels = KMeans(2, n_init=10, random_state=VSI_PAPER_SEED).fit_predict(x[:, None])
        if np.unique(labels).size == 2:
            sil = float(silhouette_score(x[:, None], labels))
    return VSIDistribution(
        int(v.size), float(np.median(v)), float(np.mean(v < 0.01)),
        float(np.mean(v < VSI_INSENSITIVE)), dip_p, sil,
    )  # fmt: skip


def low_pool(vsi: np.ndarray, threshold: float = VSI_INSENSITIVE) -> np.ndarray:
    """The low-VSI pool (N,) bool: samples with VSI < threshold. In a gate the baseline's pool
    is the one both sides are read on (docs/spec.md §5)."""
    v = np.asarray(vsi, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"vsi: expected shape (N,), got {v.shape}")
    return v < threshold


def matched_control(vsi: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """The matched high-VSI control (N,) bool: as many samples as the pool holds, taken from
    the most sensitive ones outside it (highest VSI first, lower index first among ties), so the
    control's probe and change rate are read on a set of the pool's size (VSI Table 2)."""
    v = np.asarray(vsi, dtype=np.float64)
    pool = np.asarray(pool, dtype=bool)
    if pool.shape != v.shape:
        raise ValueError(f"pool: expected shape {v.shape}, got {pool.shape}")
    outside = np.flatnonzero(~pool)
    order = outside[np.argsort(-v[outside], kind="stable")][: int(pool.sum())]
    out = np.zeros(v.shape, dtype=bool)
    out[order] = True
    return out


def pool_probe(
    features_clean: np.ndarray,
    features_perturbed: np.ndarray,
    rows: np.ndarray,
    n_splits: int = 5,
    *,
    image_ids: np.ndarray | None = None,
) -> tuple[ProbeResult | None, np.ndarray]:
    """The probe of docs/spec.md §5 fitted *on* ``rows`` (a bool mask (N,)): its result, and
    each sample's held-out correctness (N,), NaN outside ``rows``. ``None`` and all-NaN when
    the rows hold fewer distinct images than ``n_splits`` grouped folds need."""
    rows = np.asarray(rows, dtype=bool)
    n = rows.shape[0]
    correct = np.full(n, np.nan)
    ids = np.arange(n) if image_ids is None else np.asarray(image_ids)
    if np.unique(ids[rows]).size < n_splits:
        return None, correct
    fc, fp = np.asarray(features_clean), np.asarray(features_perturbed)
    probe = probe_accuracy(fc[rows], fp[rows], n_splits, image_ids=ids[rows])
    correct[rows] = probe.correct
    return probe, correct


@dataclass(frozen=True)
class GapResult:
    """Encoder-LLM gap on the low-VSI pool (VSI Table 2): probe accuracy - argmax change rate,
    both on the pool, with the matched high-VSI control read the same way.

    ``probe`` / ``control_probe`` are fitted on the pool / control alone (grouped folds; None
    when too few images); ``gap`` = ``probe_accuracy`` - ``change_rate`` exactly.
    """

    n: int
    probe: ProbeResult | None
    probe_accuracy: float
    change_rate: float
    gap: float
    control_probe: ProbeResult | None = None
    control_change_rate: float = float("nan")


def gap_terms(pool: np.ndarray, changed: np.ndarray, probe_correct: np.ndarray) -> np.ndarray:
    """Per-sample gap terms (N,): ``probe_correct - changed`` on the pool, NaN elsewhere. The
    gap is their mean, so it bootstraps like any per-sample mean."""
    terms = np.asarray(probe_correct, np.float64) - np.asarray(changed, np.float64)
    return np.where(np.asarray(pool, dtype=bool), terms, np.nan)


def encoder_llm_gap(
    vsi: np.ndarray,
    features_clean: np.ndarray,
    features_perturbed: np.ndarray,
    top1_clean: np.ndarray,
    top1_perturbed: np.ndarray,
    n_splits: int = 5,
    *,
    pool: np.ndarray | None = None,
    image_ids: np.ndarray | None = None,
) -> GapResult:
    """VSI Table 2 for one model, as the paper's protocol (docs/spec.md §5): the probe fitted
    on the low-VSI ``pool`` (default: this model's own VSI < 0.05; in a comparison, the
    reference model's), the argmax change rate on the same pool, and the matched high-VSI
    control probed the same way. Undefined (NaN gap, no probe) with an empty pool or too few
    distinct images for ``n_splits`` folds."""
    v = np.asarray(vsi, dtype=np.float64)
    pool = low_pool(v) if pool is None else np.asarray(pool, dtype=bool)
    control = matched_control(v, pool)
    changed = np.asarray(top1_clean) != np.asarray(top1_perturbed)
    probe, correct = pool_probe(
        features_clean, features_perturbed, pool, n_splits, image_ids=image_ids
    )
    control_probe, _ = pool_probe(
        features_clean, features_perturbed, control, n_splits, image_ids=image_ids
    )
    # the gap and its probe accuracy as the figure registry defines them (the VSI gates' own)
    state = SimpleNamespace(
        low=low_pool(v), pool=pool, control=control, changed=changed.astype(float),
        probe_correct=correct,
    )  # fmt: skip
    with np.errstate(invalid="ignore", divide="ignore"):
        fig = evaluate("vsi", state)
    rate_high = float(changed[control].mean()) if control.any() else float("nan")
    return GapResult(
        int(pool.sum()),
        probe,
        float(fig["probe_accuracy"]),
        float(fig["argmax_change_rate"]),
        float(fig["gap"]),
        control_probe,
        rate_high,
    )
