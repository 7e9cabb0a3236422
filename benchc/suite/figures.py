"""From metrics to snapshot payloads: which figures each case gates, with SEs and per-sample
values.

The mapping from a gated figure name to the ``GridMetrics`` attribute and to the per-sample
array that explains it lives here, once, for cells and for the model level.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from benchc.gates import DEFAULT_CELL_RULES, DEFAULT_MODEL_RULES, Figure, GateRule, Payload
from benchc.gates import parse_rules as _parse_rules
from benchc.metrics import GridMetrics

#: cell figure -> (GridMetrics attribute, bootstrap key, per-sample array)
CELL_FIGURES: dict[str, tuple[str, str, str]] = {
    "ras": ("cell_ras", "cell_ras", "ras"),
    "r_c": ("cell_r_c", "cell_r_c", "ras"),
    "r_w": ("cell_r_w", "cell_r_w", "ras"),
    "accuracy": ("cell_acc", "cell_acc", "correct"),
    "consistency": ("cell_consistency", "cell_consistency", "consistent"),
    "relative_robustness": ("cell_rel_robustness", "cell_rel_robustness", "correct"),
}
#: model figure -> (GridMetrics attribute, bootstrap key, per-sample array)
MODEL_FIGURES: dict[str, tuple[str, str, str | None]] = {
    "ras": ("ras_mean", "ras", "ras"),
    "r_c": ("r_c", "r_c", "ras"),
    "r_w": ("r_w", "r_w", "ras"),
    "mixed_cell_rate": ("mixed_cell_rate", "mixed_cell_rate", None),
}
VSI_FIGURES: tuple[str, ...] = ("insensitive_fraction", "gap")

#: Bootstrap replicates for the standard errors (fixed seed = the run's seed).
N_BOOT = 1000
#: Replicates for the encoder-LLM gap, each of which refits five probes (~20 ms on the testbed):
#: 100 keep its SE within about 7 % of its own value (a bootstrap SE's relative error is
#: ~ 1 / sqrt(2 B)) at a tenth of the cost of N_BOOT.
GAP_N_BOOT = 100


def rules_for(figures: Sequence[str], defaults: Sequence[str]) -> list[GateRule]:
    """The default rules that apply to ``figures``, in ``figures`` order."""
    table = _parse_rules(list(defaults))
    return [table[f] for f in figures if f in table]


def _f(x: Any) -> float:
    return float(np.asarray(x, dtype=np.float64))


def cell_payload(
    grid: GridMetrics,
    *,
    scope: str,
    model: str,
    dataset: str,
    ids: Sequence[str],
    info: Mapping[str, Any],
    seed: int,
    n_boot: int = N_BOOT,
) -> Payload:
    """One (corruption, severity) cell: SPEC 6 figures of a (N, 1, 1) grid."""
    if grid.shape[1:] != (1, 1):
        raise ValueError(f"cell_payload needs a (N, 1, 1) grid, got {grid.shape}")
    ses = grid.standard_errors(n_boot, seed)
    figures = {
        name: Figure(_f(getattr(grid, attr)[0, 0]), _f(ses[se_key][0, 0]), per_sample)
        for name, (attr, se_key, per_sample) in CELL_FIGURES.items()
    }
    per_sample = {
        "ras": grid.ras[:, 0, 0],
        "correct": grid.correct[:, 0, 0].astype(np.float64),
        "consistent": grid.consistent[:, 0, 0].astype(np.float64),
    }
    extra = {
        "clean_accuracy": round(_f(grid.acc_clean), 6),
        "d_acc": round(_f(grid.cell_d_acc[0, 0]), 6),
        "d_s": round(_f(grid.cell_d_s[0, 0]), 6),
        "d_c": round(_f(grid.cell_d_c[0, 0]), 6),
    }
    return Payload(
        scope=scope,
        model=model,
        dataset=dataset,
        n=len(ids),
        figures=figures,
        rules=rules_for(list(CELL_FIGURES), DEFAULT_CELL_RULES),
        ids=tuple(ids),
        per_sample=per_sample,
        info={**info, **extra},
    )


def model_payload(
    grid: GridMetrics,
    figure: str,
    *,
    model: str,
    dataset: str,
    ids: Sequence[str],
    info: Mapping[str, Any],
    seed: int,
    n_boot: int = N_BOOT,
) -> Payload:
    """One model-level figure over the whole selected grid."""
    if figure not in MODEL_FIGURES:
        raise ValueError(f"unknown model-level figure {figure!r}; known: {list(MODEL_FIGURES)}")
    attr, se_key, per_sample_key = MODEL_FIGURES[figure]
    ses = grid.standard_errors(n_boot, seed)
    per_sample: dict[str, np.ndarray] = {}
    if per_sample_key == "ras":
        with warnings.catch_warnings():  # a sample with no valid pair has an undefined mean
            warnings.simplefilter("ignore", RuntimeWarning)
            per_sample["ras"] = np.nanmean(grid.ras.reshape(grid.shape[0], -1), axis=1)
    extra = {
        "clean_accuracy": round(_f(grid.acc_clean), 6),
        "corrupt_accuracy": round(_f(grid.acc_corrupt), 6),
        "consistency": round(_f(grid.consistency), 6),
    }
    return Payload(
        scope=f"model:{figure}",
        model=model,
        dataset=dataset,
        n=len(ids),
        figures={figure: Figure(_f(getattr(grid, attr)), _f(ses[se_key]), per_sample_key)},
        rules=rules_for([figure], DEFAULT_MODEL_RULES),
        ids=tuple(ids) if per_sample else (),
        per_sample=per_sample,
        info={**info, **extra},
    )
