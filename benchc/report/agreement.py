"""Cross-run agreement blocks of ``benchc compare`` (``report.json`` ``agreement``): what two or
more stored runs say about each other, beyond each run's own figures.

* ``vsi``: for every pair of runs with VSI arrays, Spearman rho of per-sample VSI on their
  shared sample ids (matched by id), the paper's permutation p-value and a bootstrap CI, and
  the Jaccard index of their low-VSI sets (VSI Sec. 2.3 / App. B.2; docs/spec.md §5).
* ``table_vi``: Bench-C Table VI, each run's rank by RAS and the rank shift of the
  accuracy-style rankings (docs/spec.md §4), over the runs with a grid.
* ``table_v``: Bench-C Table V, a model's option distributions from logits beside its sampling
  proxy (docs/spec.md §3): Acc^(o), ΔAcc and RAS of both on their shared samples and cells.

Every undefined number is null with a ``note`` saying why, never an error.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchc import spec
from benchc.gates.evidence import vsi_values
from benchc.metrics import GridMetrics, compute_grid
from benchc.metrics.options import require_answered
from benchc.metrics.ranking import TABLE_VI_METRICS, rank_mismatch
from benchc.metrics.signals import spearman_bootstrap_ci, spearman_permutation
from benchc.report.data import num, nums
from benchc.results.reader import StoredRun

#: The VSI paper's cross-model permutation test: 10^5 shuffles, seed 42 (App. B.2 / App. E).
PERMUTATION_RESAMPLES = spec.VSI_PAPER_PERMUTATIONS
PERMUTATION_SEED = spec.VSI_PAPER_SEED
#: Shuffles held in memory at once (8 MB per 1000 samples); ~1.6 s for 10^5 on 1000 samples.
PERMUTATION_BATCH = 1000
#: The paper's bootstrap: B = 1000 resamples, seed 42.
BOOTSTRAP_RESAMPLES = spec.VSI_PAPER_N_BOOT
BOOTSTRAP_SEED = spec.VSI_PAPER_SEED
#: Spearman needs three pairs.
MIN_SHARED = 3
#: Table V's two access routes: the logit side (white-box logits, or a server's log-probs as
#: the paper's "-Logit" row) and the sampling proxy.
LOGIT_SIDE = ("logits", "logprobs")
SAMPLING = "sampling"
PAIRING_RULE = (
    "a logit run and a sampling run pair when their manifests name the same model "
    "(model_name: the HF model's name, the served model's name for a server; a name that is "
    "a path or a hub id is compared by its last component, so `transformers serve "
    "/ckpt/tiny-vlm` pairs with --model=/ckpt/tiny-vlm); the route is the one the run "
    "recorded after scoring (option_access), else read from the model fingerprint: hf: = "
    "logits, openai: with :lp<k> = log-probs, openai: without = sampling proxy"
)


def same_model(a: str, b: str) -> bool:
    """Whether two runs' model names name one model: equal, or equal in their last component
    (model names are slugs, ``--`` where the source had ``/``: a server answers to the
    checkpoint's full path or hub id, the white-box run to its folder name or hub id)."""
    return a == b or a.rsplit("--", 1)[-1] == b.rsplit("--", 1)[-1]


def option_access(manifest: dict[str, Any]) -> str | None:
    """How a run's option distributions were obtained: the ``option_access`` its run recorded
    once it had scored (a server that turned out to serve no log-probs was sampled), else,
    for runs stored before that was recorded, read from the model fingerprint:
    ``"logits"``, ``"logprobs"``, ``"sampling"`` or None (a backend benchc cannot tell)."""
    recorded = manifest.get("option_access")
    if recorded in (*LOGIT_SIDE, SAMPLING):
        return str(recorded)
    fp = str(manifest.get("model_fingerprint") or "")
    if fp.startswith("hf:"):
        return "logits"
    if fp.startswith("openai:"):
        return "logprobs" if re.search(r":seed-?\d+:lp\d+", fp) else SAMPLING
    return None


def _shared(ids_a: Sequence[str], ids_b: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Row indices of the ids both runs hold, in the first run's order."""
    where = {sid: i for i, sid in enumerate(ids_b)}
    rows = [(i, where[sid]) for i, sid in enumerate(ids_a) if sid in where]
    if not rows:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    ia, ib = zip(*rows, strict=True)
    return np.array(ia), np.array(ib)


# -- VSI rank agreement -----------------------------------------------------------------------
def vsi_pair(
    a: StoredRun,
    b: StoredRun,
    *,
    n_resamples: int = PERMUTATION_RESAMPLES,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    support: str = spec.VSI_SUPPORT,
) -> dict[str, Any]:
    """Rho, p, CI and low-VSI Jaccard of two runs' per-sample VSI (on ``support``, the one the
    gates read) on their shared ids."""
    ia, ib = _shared(a.vsi_ids or a.ids, b.vsi_ids or b.ids)
    va = vsi_values(a.vsi, support)[ia]  # type: ignore[arg-type]
    vb = vsi_values(b.vsi, support)[ib]  # type: ignore[arg-type]
    ok = np.isfinite(va) & np.isfinite(vb)
    va, vb = va[ok], vb[ok]
    out: dict[str, Any] = {"n_shared": int(va.size), "rho": None, "p_value": None, "ci": None}
    low_a, low_b = va < spec.VSI_INSENSITIVE, vb < spec.VSI_INSENSITIVE
    union = int((low_a | low_b).sum())
    out.update(
        n_low_a=int(low_a.sum()),
        n_low_b=int(low_b.sum()),
        jaccard_low=num((low_a & low_b).sum() / union) if union else None,
        note=None,
    )
    if va.size < MIN_SHARED:
        out["note"] = f"{va.size} shared sample ids with VSI: Spearman needs at least {MIN_SHARED}"
        return out
    res = spearman_permutation(
        va, vb, n_resamples=n_resamples, seed=PERMUTATION_SEED, batch=PERMUTATION_BATCH
    )
    if res.rho != res.rho:  # NaN: one side constant
        out["note"] = "VSI is constant on the shared ids of one run: rho is undefined"
        return out
    lo, hi = spearman_bootstrap_ci(va, vb, n_boot=n_boot, seed=BOOTSTRAP_SEED)
    out.update(rho=num(res.rho), p_value=num(res.p_value), ci=[num(lo), num(hi)])
    if not union:
        out["note"] = f"no shared sample has VSI < {spec.VSI_INSENSITIVE:g} in either run"
    return out


def vsi_agreement(
    runs: Sequence[StoredRun],
    labels: Sequence[str],
    *,
    n_resamples: int = PERMUTATION_RESAMPLES,
    n_boot: int = BOOTSTRAP_RESAMPLES,
    support: str = spec.VSI_SUPPORT,
) -> dict[str, Any]:
    """Every pair of runs with VSI arrays, in input order."""
    have = [(r, lab) for r, lab in zip(runs, labels, strict=True) if r.vsi is not None]
    kw = {"n_resamples": n_resamples, "n_boot": n_boot, "support": support}
    pairs = [
        {"a": la, "b": lb, **vsi_pair(ra, rb, **kw)}
        for i, (ra, la) in enumerate(have)
        for rb, lb in have[i + 1 :]
    ]
    note = None
    if not pairs:
        note = f"{len(have)} of the compared runs have VSI arrays: agreement needs two"
    return {
        "n_permutations": n_resamples,
        "permutation_seed": PERMUTATION_SEED,
        "n_boot": n_boot,
        "bootstrap_seed": BOOTSTRAP_SEED,
        "low_vsi": spec.VSI_INSENSITIVE,
        "support": support,
        "pairs": pairs,
        "note": note,
    }


# -- Bench-C Table VI -------------------------------------------------------------------------
#: The digits Table VI shows its scores with (``benchc.report.fmt.f``), and ranks them at.
TABLE_VI_DECIMALS = 3


def table_vi(runs: Sequence[StoredRun], labels: Sequence[str]) -> dict[str, Any]:
    """Table VI over the runs with a grid (rows in RAS order, rank 1 best)."""
    grids = {lab: r.grid for r, lab in zip(runs, labels, strict=True) if r.grid is not None}
    out: dict[str, Any] = {"available": False, "metrics": list(TABLE_VI_METRICS), "note": None}
    if len(grids) < 2:
        out["note"] = f"{len(grids)} of the compared runs have a Bench-C grid: ranking needs two"
        return out
    figs = {lab: g.model_figures() for lab, g in grids.items()}  # type: ignore[union-attr]
    scores = {m: np.array([figs[lab][m] for lab in grids], dtype=np.float64)
              for m in TABLE_VI_METRICS}  # fmt: skip
    # a figure undefined on some run (no counted pair) is left out of the ranking, in words
    undefined = {m: [lab for lab, v in zip(grids, scores[m], strict=True) if not np.isfinite(v)]
                 for m in TABLE_VI_METRICS}  # fmt: skip
    kept = [m for m in TABLE_VI_METRICS if not undefined[m]]
    said = "; ".join(
        f"{m} is undefined for {', '.join(labs)} (no sample counts towards it)"
        for m, labs in undefined.items()
        if labs
    )
    if "ras" not in kept:
        out["note"] = f"no ranking: {said}"
        return out
    # ranked as shown (3 decimals): equal displayed values share a rank
    t = rank_mismatch(
        list(grids), {m: scores[m] for m in kept}, reference="ras", decimals=TABLE_VI_DECIMALS
    )
    out["metrics"] = kept
    with_grid = [r for r in runs if r.grid is not None]
    setups = {(r.manifest.get("dataset_fingerprint"), tuple(r.cells)) for r in with_grid}
    out.update(
        available=True,
        reference=t.reference,
        models=list(t.models),
        scores=nums(t.scores),
        ranks=t.ranks.tolist(),
        shift=t.shift.tolist(),
    )
    notes = [f"left out of the ranking: {said}" if said else ""]
    if len(setups) > 1:
        notes.append("the runs' datasets or cells differ: the ranks compare different grids")
    out["note"] = "; ".join(n for n in notes if n) or None
    return out


# -- Bench-C Table V --------------------------------------------------------------------------
def _sub_grid(
    run: StoredRun, rows: np.ndarray, cs: Sequence[str], ss: Sequence[int]
) -> GridMetrics:
    ci = [run.corruptions.index(c) for c in cs]
    si = [run.severities.index(s) for s in ss]
    k = int(run.n_options[rows].max())
    cube = run.logits[rows][:, ci][:, :, si][..., :k]  # type: ignore[index]
    clean = run.clean_logits[rows][:, :k]  # type: ignore[index]
    ids = [run.ids[i] for i in rows]
    require_answered(clean, cube, run.n_options[rows], ids, cs, ss)
    return compute_grid(clean, cube, run.answers[rows], run.n_options[rows], corruptions=tuple(cs))


def table_v_pair(logit: StoredRun, sampling: StoredRun) -> dict[str, Any]:
    """Table V rows (samples, Acc^(o), ΔAcc, RAS) of both runs on their shared samples and
    cells, their difference (sampling - logit) and two per-sample / per-cell agreements."""
    il, isam = _shared(logit.ids, sampling.ids)
    cs = [c for c in logit.corruptions if c in sampling.corruptions]
    ss = [s for s in logit.severities if s in sampling.severities]
    out: dict[str, Any] = {"n_shared": int(il.size), "corruptions": cs, "severities": ss}
    if il.size < MIN_SHARED or not cs or not ss:
        out["note"] = (
            f"{il.size} shared samples, {len(cs)} x {len(ss)} shared cells: "
            f"Table V needs at least {MIN_SHARED} samples and one cell"
        )
        return out
    if not np.array_equal(logit.answers[il], sampling.answers[isam]):
        out["note"] = "the shared sample ids have different answers: not the same samples"
        return out
    grids = (_sub_grid(logit, il, cs, ss), _sub_grid(sampling, isam, cs, ss))
    rows = []
    for g in grids:
        n, d, lv = g.shape
        rows.append(
            {
                "samples": f"{n}×{d}×{lv}",
                "acc_clean": num(g.figure("acc_clean")),
                "d_acc": num(g.figure("d_acc")),
                "ras": num(g.figure("ras")),
            }
        )
    diff = {
        k: (None if rows[0][k] is None or rows[1][k] is None else rows[1][k] - rows[0][k])
        for k in ("acc_clean", "d_acc", "ras")
    }
    cell_a, cell_b = (np.asarray(g.cell("ras"), np.float64).ravel() for g in grids)
    ok = np.isfinite(cell_a) & np.isfinite(cell_b)
    rho = None
    if ok.sum() >= MIN_SHARED and np.ptp(cell_a[ok]) > 0 and np.ptp(cell_b[ok]) > 0:
        from scipy import stats  # here: scipy.stats costs every run's start 0.7 s

        rho = num(stats.spearmanr(cell_a[ok], cell_b[ok]).statistic)
    out.update(
        logit_row=rows[0],
        sampling_row=rows[1],
        difference=diff,
        top1_agreement=num(np.mean(grids[0].pred_clean == grids[1].pred_clean)),
        cell_ras_rho=rho,
        note=None if rho is not None else f"cell RAS rho needs {MIN_SHARED} non-constant cells",
    )
    return out


def table_v(runs: Sequence[StoredRun], labels: Sequence[str]) -> dict[str, Any]:
    """Every (logit run, sampling run) pair of one model among the compared runs."""
    access = [option_access(r.manifest) for r in runs]
    pairs = []
    for r, lab, acc in zip(runs, labels, access, strict=True):
        if acc not in LOGIT_SIDE or r.grid is None:
            continue
        for s, slab, sacc in zip(runs, labels, access, strict=True):
            if sacc == SAMPLING and s.grid is not None and same_model(s.model_name, r.model_name):
                pair = {"model": r.model_name, "logit": lab, "logit_access": acc, "sampling": slab}
                pairs.append({**pair, **table_v_pair(r, s)})
    note = None
    if not pairs:
        seen = zip(labels, access, strict=True)
        routes = ", ".join(f"{lab}: {acc or 'unknown'}" for lab, acc in seen)
        note = f"no logit run and sampling run of the same model among the compared runs ({routes})"
    return {"available": bool(pairs), "rule": PAIRING_RULE, "pairs": pairs, "note": note}


def block(
    runs: Sequence[StoredRun],
    labels: Sequence[str],
    *,
    n_resamples: int = PERMUTATION_RESAMPLES,
    n_boot: int = BOOTSTRAP_RESAMPLES,
) -> dict[str, Any]:
    """``report.json`` ``agreement`` of the compared runs."""
    return {
        "vsi": vsi_agreement(runs, labels, n_resamples=n_resamples, n_boot=n_boot),
        "table_vi": table_vi(runs, labels),
        "table_v": table_v(runs, labels),
    }
