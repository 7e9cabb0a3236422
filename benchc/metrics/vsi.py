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
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import normalize

from benchc.metrics.figures import evaluate
from benchc.spec import VSI_FLOOR, VSI_INSENSITIVE

__all__ = [
    "GapResult",
    "ProbeResult",
    "argmax_change_rate",
    "encoder_llm_gap",
    "gap_terms",
    "insensitive_fraction",
    "probe_accuracy",
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


def _on_union(union: np.ndarray, ids: np.ndarray, logp: np.ndarray, floor: float) -> np.ndarray:
    """Probability of each union token under a top-k distribution (floor where it is absent)."""
    match = union[:, :, None] == ids[:, None, :]
    prob = (match * np.exp(logp)[:, None, :]).sum(axis=2)
    return np.where(match.any(axis=2), np.maximum(prob, floor), floor)


def vsi_topk(
    ids_clean: np.ndarray,
    logp_clean: np.ndarray,
    ids_perturbed: np.ndarray,
    logp_perturbed: np.ndarray,
    floor: float = VSI_FLOOR,
) -> np.ndarray:
    """``vsi_top50``: KL over the union of both top-k supports; each distribution restricted to
    the union with a ``floor`` for tokens outside its own top-k, then renormalised
    (docs/spec.md §5)."""
    ids = [np.asarray(ids_clean), np.asarray(ids_perturbed)]
    lps = [np.asarray(logp_clean, dtype=np.float64), np.asarray(logp_perturbed, dtype=np.float64)]
    names = ("clean", "perturbed")
    for i, lp, nm in zip(ids, lps, names, strict=True):
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
    allid = np.concatenate(ids, axis=1)
    union = np.sort(allid, axis=1)
    first = np.ones(union.shape, dtype=bool)
    first[:, 1:] = union[:, 1:] != union[:, :-1]
    p = _on_union(union, ids[0], lps[0], floor) * first
    q = _on_union(union, ids[1], lps[1], floor) * first
    p /= p.sum(axis=1, keepdims=True)
    q /= q.sum(axis=1, keepdims=True)
    return np.maximum(rel_entr(p, q).sum(axis=1), 0.0)


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
class GapResult:
    """Encoder-LLM gap on the low-VSI subset: probe accuracy - argmax change rate.

    ``probe`` is fitted over all samples (grouped folds) and read on the subset:
    ``probe_accuracy`` = mean of ``probe.correct`` over the ``n`` low-VSI samples.
    """

    n: int
    probe: ProbeResult | None
    probe_accuracy: float
    change_rate: float
    gap: float


def gap_terms(
    vsi: np.ndarray,
    changed: np.ndarray,
    probe_correct: np.ndarray,
    threshold: float = VSI_INSENSITIVE,
) -> np.ndarray:
    """Per-sample gap terms (N,): ``probe_correct - changed`` on samples with VSI < threshold,
    NaN elsewhere. The gap is their mean, so it bootstraps like any per-sample mean."""
    v = np.asarray(vsi, dtype=np.float64)
    terms = np.asarray(probe_correct, np.float64) - np.asarray(changed, np.float64)
    return np.where(v < threshold, terms, np.nan)


def encoder_llm_gap(
    vsi: np.ndarray,
    features_clean: np.ndarray,
    features_perturbed: np.ndarray,
    top1_clean: np.ndarray,
    top1_perturbed: np.ndarray,
    threshold: float = VSI_INSENSITIVE,
    n_splits: int = 5,
    *,
    image_ids: np.ndarray | None = None,
) -> GapResult:
    """Probe accuracy minus argmax change rate, both read on the samples with VSI < threshold.

    The probe is fitted with grouped folds over *all* samples and each sample's held-out
    correctness is read on the low-VSI subset (a known departure, docs/spec.md §5: the
    classifier does not change with the subset, so a baseline and a current run are compared on
    one definition, and five times more images train it). ``image_ids`` marks repeated rows.
    Undefined (NaN gap, no probe) with too few distinct images for ``n_splits`` folds, or an
    empty subset.
    """
    v = np.asarray(vsi, dtype=np.float64)
    low = v < threshold
    n = int(low.sum())
    changed = np.asarray(top1_clean) != np.asarray(top1_perturbed)
    rate = argmax_change_rate(np.asarray(top1_clean)[low], np.asarray(top1_perturbed)[low])
    ids = np.arange(v.size) if image_ids is None else np.asarray(image_ids)
    if np.unique(ids).size < n_splits or n == 0:
        return GapResult(n, None, float("nan"), rate, float("nan"))
    probe = probe_accuracy(features_clean, features_perturbed, n_splits, image_ids=ids)
    # the gap and its probe accuracy as the figure registry defines them (the VSI gates' own)
    state = SimpleNamespace(low=low, changed=changed.astype(float), probe_correct=probe.correct)
    fig = evaluate("vsi", state)
    return GapResult(n, probe, float(fig["probe_accuracy"]), rate, float(fig["gap"]))
