"""Payload builders: a level's figures (from :data:`benchc.gates.figures.FIGURES`) computed from
per-sample evidence, with their bootstrap SEs and minimal detectable regressions.

Pure functions of evidence and settings: the live suite (:mod:`benchc.suite.cases`), the
report and ``benchc report`` on a stored run build the same payloads from the same arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from benchc.gates import (
    Evidence,
    Figure,
    GateRule,
    GridEvidence,
    Payload,
    default_rules,
    figures,
)
from benchc.gates.check import N_BOOT, ZFor
from benchc.gates.figures import Level, reads_rotations
from benchc.metrics.figures import definition
from benchc.metrics.stats import replicate_se, resample_counts
from benchc.spec import family_cells  # the report's too: it lives below both


def build_payload(
    evidence: Evidence,
    *,
    level: Level,
    scope: str,
    model: str,
    dataset: str,
    info: Mapping[str, Any],
    seed: int,
    z_for: ZFor,
    names: Sequence[str] | None = None,
    n_boot: int = N_BOOT,
) -> Payload:
    """The payload of one case: ``names`` (default: every figure of ``level``) with values,
    unpaired bootstrap SEs and MDRs, the level's default rules for the gated ones among them,
    and the evidence."""
    specs = [f for f in figures(level) if names is None or f.name in names]
    if isinstance(evidence, GridEvidence) and not reads_rotations(level, names):
        evidence = evidence.without_order()  # what its figures read, no more (its sidecar)
    values = evidence.figures()
    reps = evidence.replicates(resample_counts(len(evidence.ids), n_boot, seed))
    rules = [r for r in default_rules(level) if any(r.figure == f.name for f in specs)]
    figs = {
        f.name: Figure(
            values[f.key], float(replicate_se(reps[f.key])) if f.key in reps else math.nan
        )
        for f in specs
    }
    extra = {k: round(v, 6) for k, v in values.items() if k not in {f.key for f in specs}}
    if level == "vsi":
        extra = {k: v for k, v in extra.items() if math.isfinite(v)}
    else:  # the headline context of a Bench-C case, not the whole figure table
        extra = {definition(k).key: v for k, v in extra.items() if k in ("acc_clean", "accuracy")}
    payload = Payload(
        scope, level, model, dataset, len(evidence.ids), figs, rules, {**info, **extra}, evidence
    )
    return with_rules(payload, rules, z_for=z_for, seed=seed)


def with_rules(payload: Payload, rules: Sequence[GateRule], *, z_for: ZFor, seed: int) -> Payload:
    """``payload`` under ``rules``, each gated figure's minimal detectable regression
    recomputed for them (a hand-edited floor changes it)."""
    from benchc.gates.engine import with_mdrs

    return with_mdrs(payload.with_rules(rules), z_for=z_for, seed=seed)


def grid_payloads(
    evidence: GridEvidence,
    *,
    model: str,
    dataset: str,
    info: Mapping[str, Any],
    seed: int,
    z_for: ZFor,
) -> dict[str, Payload]:
    """Every Bench-C case of one grid, keyed like the suite's cases: ``cell:<key>``,
    ``family:<name>``, ``model:<figure>`` (what ``benchc report`` re-checks offline)."""
    common = dict(model=model, dataset=dataset, seed=seed, z_for=z_for)
    out = {}
    for key in evidence.conditions:
        out[f"cell:{key}"] = build_payload(
            evidence.restrict([key]), level="cell", scope=key, info=info, **common
        )
    for fam, cells in family_cells(evidence.conditions).items():
        out[f"family:{fam}"] = build_payload(
            evidence.restrict(cells),
            level="family",
            scope=fam,
            info={**info, "conditions": cells},
            **common,
        )
    grid_info = {**info, "conditions": list(evidence.conditions)}
    for f in figures("model", gated_only=True):
        out[f"model:{f.name}"] = build_payload(
            evidence, level="model", scope="model", names=[f.name], info=grid_info, **common
        )
    return out
