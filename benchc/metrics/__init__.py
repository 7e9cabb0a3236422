"""Pure-numpy metrics of both papers (Bench-C and VSI): arrays in, arrays out, no torch.

Array layout: option logits ``[sample, condition, option]`` NaN-padded to K_max; the corrupted
part as ``[sample, corruption, severity, option]``. Undefined quantities are NaN, never 0.
"""

from benchc.metrics.grid import (
    CELL_FIGURES,
    MODEL_FIGURES,
    GridMetrics,
    compute_grid,
    grid_from_logits,
    split_conditions,
)
from benchc.metrics.options import (
    alignment,
    confidence,
    infer_n_options,
    normalized_entropy,
    option_mask,
    option_probs,
    predictions,
    validate_answers,
    validate_option_logits,
)
from benchc.metrics.ras import REGIMES, RegimeTable, ras, regime_table, sign_regime
from benchc.metrics.selection import (
    LosoRow,
    Selection,
    eligible,
    gini_dispersion,
    greedy_novelty,
    jaccard,
    kappa,
    leave_one_selector_out,
    select,
    selector_dispersion,
)
from benchc.metrics.states import (
    STATES,
    StateAttribution,
    mixed_cell_rate,
    state_attribution,
    state_codes,
)
from benchc.metrics.stats import (
    bootstrap_ci,
    bootstrap_indices,
    bootstrap_replicates,
    bootstrap_se,
    resample_counts,
    weighted_nanmean,
)
from benchc.metrics.trajectories import (
    TRAJECTORIES,
    TrajectorySummary,
    class_conditioned_mean,
    trajectory_classes,
    trajectory_summary,
)

__all__ = [
    "CELL_FIGURES",
    "MODEL_FIGURES",
    "REGIMES",
    "STATES",
    "TRAJECTORIES",
    "GridMetrics",
    "LosoRow",
    "RegimeTable",
    "Selection",
    "StateAttribution",
    "TrajectorySummary",
    "alignment",
    "bootstrap_ci",
    "bootstrap_indices",
    "bootstrap_replicates",
    "bootstrap_se",
    "class_conditioned_mean",
    "compute_grid",
    "confidence",
    "eligible",
    "gini_dispersion",
    "greedy_novelty",
    "grid_from_logits",
    "infer_n_options",
    "jaccard",
    "kappa",
    "leave_one_selector_out",
    "mixed_cell_rate",
    "normalized_entropy",
    "option_mask",
    "option_probs",
    "predictions",
    "ras",
    "regime_table",
    "resample_counts",
    "select",
    "selector_dispersion",
    "sign_regime",
    "split_conditions",
    "state_attribution",
    "state_codes",
    "trajectory_classes",
    "trajectory_summary",
    "validate_answers",
    "validate_option_logits",
    "weighted_nanmean",
]
