"""The report's VSI block (docs/spec.md §5): VSI Table 1 (the distribution of each variant),
Table 2 / Fig. 2 (probe vs argmax change on the low-VSI pool and its high-VSI control), Table 3
(AUROC and PRR@80 of max-prob, region VSI, whole-image VSI and their hybrid, with bootstrap
intervals; ECE, Brier and the reliability table), and both supports side by side.

Table 2 reads the evidence the VSI gates read (:class:`benchc.gates.evidence.VSIEvidence`), on
the pool a gate would use: the baseline's, or the reference run's in a comparison.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from benchc import spec
from benchc.gates.evidence import VSIEvidence, vsi_values
from benchc.metrics.options import confidence, infer_n_options, option_probs, predictions
from benchc.metrics.selective import reliability, signal_table
from benchc.metrics.signals import brier, ece, zscore_hybrid
from benchc.metrics.vsi import vsi_distribution
from benchc.provenance import sklearn_version
from benchc.results.reader import StoredRun

#: Table 3's signals: key -> label (the paper's column names).
SIGNALS = {
    "max_prob": "max-prob",
    "vsi_region": "VSI_r (region)",
    "vsi_whole": "VSI_w (whole image)",
    "hybrid": "hyb(r+w)",
}


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _whole(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The whole-image pass's arrays under the names :func:`vsi_values` reads."""
    out = {"vsi": arrays["vsi_whole"]}
    if "vsi_whole_top50" in arrays:
        out["vsi_top50"] = arrays["vsi_whole_top50"]
    return out


def run_evidence(run: StoredRun, support: str = spec.VSI_SUPPORT) -> VSIEvidence | None:
    """The VSI gates' evidence of a stored run (its own pool), or None without VSI arrays."""
    if run.vsi is None:
        return None
    ids = run.vsi_ids if run.vsi_ids is not None else run.ids
    return VSIEvidence.from_run(run.vsi, list(ids), support=support)


def vsi_by_id(run: StoredRun | None, support: str = spec.VSI_SUPPORT) -> dict[str, float]:
    """Each VSI sample's VSI on ``support`` by sample id (empty without VSI arrays)."""
    if run is None or run.vsi is None:
        return {}
    ids = run.vsi_ids if run.vsi_ids is not None else run.ids
    return dict(zip(ids, vsi_values(run.vsi, support).tolist(), strict=True))


def on_pool(ev: VSIEvidence, ref: VSIEvidence | None) -> tuple[VSIEvidence, str]:
    """``ev`` read on ``ref``'s pool, as a gate reads the current run on the baseline's (same
    ids needed); its own pool otherwise. Returns the evidence and where its pool came from."""
    if ref is None or ref is ev:
        return ev, "own"
    if set(ref.ids) != set(ev.ids):
        return ev, "own (the reference has other samples)"
    return ev.align(ref.ids).paired_with(ref)[0], "reference"


def gap_table(
    ev: VSIEvidence, pool_source: str, info: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Table 2 / Fig. 2 from the gates' own figures: probe accuracy (fold std), argmax change
    and their difference on the pool, and the same on its matched high-VSI control. ``info``:
    a snapshot's recorded fold stds, for evidence whose probes were fitted when it was
    recorded."""
    fig = ev.figures()
    pool_probe, control_probe = ev.probes
    info = info or {}
    return {
        "pool": pool_source,
        "n_low": int(ev.pool.sum()),
        "n_high": int(ev.control.sum()),
        "probe_low": _num(fig["probe_accuracy"]),
        "probe_low_std": _num(pool_probe.fold_std if pool_probe else info.get("probe_fold_std")),
        "change_low": _num(fig["argmax_change_rate"]),
        "probe_high": _num(fig["probe_accuracy_high"]),
        "probe_high_std": _num(
            control_probe.fold_std if control_probe else info.get("probe_high_fold_std")
        ),
        "change_high": _num(fig["argmax_change_rate_high"]),
        "gap": _num(fig["gap"]),
    }


def distribution_row(vsi: np.ndarray) -> dict[str, Any]:
    """One row of VSI Table 1."""
    d = vsi_distribution(vsi)
    return {
        "n": d.n,
        "median": _num(d.median),
        "below_001": _num(d.below_001),
        "below_005": _num(d.below_005),
        "dip_p": _num(d.dip_p),
        "silhouette": _num(d.silhouette),
    }


def error_signals(
    arrays: dict[str, np.ndarray], answers: np.ndarray | None, support: str
) -> tuple[dict[str, Any] | None, str | None]:
    """VSI Table 3 of one run from its VSI pass's own clean option answers; (None, why) when
    the arrays cannot give it."""
    if "option_logits" not in arrays or "vsi_whole" not in arrays or answers is None:
        return None, "error signals (VSI arrays without clean option answers or whole-image VSI)"
    logits = np.asarray(arrays["option_logits"], dtype=np.float64)
    p = option_probs(logits, infer_n_options(logits, name="option_logits"))
    conf = confidence(p).astype(np.float64)
    correct = predictions(p) == np.asarray(answers)
    errors = ~correct
    region = vsi_values(arrays, support)
    whole = vsi_values(_whole(arrays), support)
    risks = {"max_prob": -conf, "vsi_region": -region, "vsi_whole": -whole}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        risks["hybrid"] = zscore_hybrid(np.stack([-region, -whole]))
    table: dict[str, Any] = {}
    if np.isfinite(risks["hybrid"]).all():
        scores = signal_table(errors, risks)
    else:  # a constant component has no z-score: the hybrid is undefined
        scores = signal_table(errors, {k: v for k, v in risks.items() if k != "hybrid"})
    for key in SIGNALS:
        s = scores.get(key)
        table[key] = {
            "auroc": _num(s.auroc) if s else None,
            "auroc_ci": [_num(x) for x in s.auroc_ci] if s else [None, None],
            "prr80": _num(s.prr) if s else None,
            "prr80_ci": [_num(x) for x in s.prr_ci] if s else [None, None],
        }
    ranked = [k for k in SIGNALS if table[k]["auroc"] is not None]
    best = max(ranked, key=lambda k: table[k]["auroc"]) if ranked else None
    return {
        "n": int(correct.size),
        "accuracy": _num(correct.mean()),
        "signals": table,
        "best": best,
        "ece": _num(ece(conf, correct)),
        "brier": _num(brier(conf, correct)),
        "reliability": reliability(conf, correct),
        # the single-signal summary older readers of report.json know
        "auroc_vsi": table["vsi_region"]["auroc"],
        "prr80": table["vsi_region"]["prr80"],
    }, None


def vsi_block(
    run: StoredRun, *, support: str = spec.VSI_SUPPORT, ref: VSIEvidence | None = None
) -> dict[str, Any] | None:
    """Every VSI figure of one stored run, the gated ``support`` first; ``ref``: the evidence
    whose pool Table 2 is read on (the baseline's or the comparison's reference run)."""
    a = run.vsi
    if a is None:
        return None
    missing = []
    k = int(a["vsi_topk"][0]) if "vsi_topk" in a and a["vsi_topk"].size else 0
    if k:
        missing.append(f"full next-token distribution (VSI is the top-{k} variant)")
    if "features_clean" not in a or "features_blur" not in a:
        missing.append("vision tower (no gap probe: the encoder-LLM gap is undefined)")
    # each support's own evidence once (probes fitted on its own pool); a server's top-k VSI
    # is its only support, named by its k
    names = {support: f"top{k}"} if k else {sup: sup for sup in spec.VSI_SUPPORTS}
    own = {sup: run_evidence(run, sup) for sup in names}
    ev, source = on_pool(own[support], ref)
    fig = ev.figures()
    vsi = np.asarray(ev.vsi, dtype=np.float64)
    rows = {sup: distribution_row(own[sup].vsi) for sup in names}
    variants = {}
    for sup, name in names.items():
        figs = own[sup].figures()
        gated = sup == support
        variants[name] = {
            "gated": gated,
            **rows[sup],
            "insensitive_fraction": _num(figs["insensitive_fraction"]),
            # the gated support's gap is the gate's and Table 2's (read on the reference
            # pool); the other support's is read on its own pool, and says so
            "gap": _num(fig["gap"] if gated else figs["gap"]),
            "gap_pool": source if gated else "own",
        }
    table1 = [{"variant": "region blur", **rows[support]}]
    if "vsi_whole" in a:
        whole = vsi_values(_whole(a), support)
        table1.append({"variant": "whole image", **distribution_row(whole)})
    else:
        missing.append("whole-image VSI (stored before the whole-image pass existed)")
    signals, why = error_signals(a, run.vsi_answers, support)
    if why:
        missing.append(why)
    return {
        "n": int(vsi.size),
        "median": _num(np.median(vsi)),
        "insensitive_fraction": _num(fig["insensitive_fraction"]),
        "values": [_num(round(float(v), 6)) for v in vsi],
        "variant": f"vsi_top{k} (estimated)" if k else "vsi_top50" if support == "top50" else "vsi",
        "support": support,
        "sklearn": sklearn_version(),
        "variants": variants,
        "table1": table1,
        "missing": missing,
        "gap": gap_table(ev, source),
        "signals": signals,
        "fallbacks": int(a["fallback"].sum()) if "fallback" in a else 0,
        "located": int(a["located"].sum()) if "located" in a else 0,
    }
