"""Bench-C test-set selection: selectors x corruptions -> kappa, A+, novelty -> e > mean.

Core (arrays in, no models): :func:`benchc.select.core.run_selection`;
model runs: :func:`benchc.select.predict.collect_predictions`;
output: :func:`benchc.select.report.write_selection`; CLI: ``python -m benchc.select``.
"""

from benchc.select.core import SelectionRun, build_report, per_sample_rows, run_selection

__all__ = ["SelectionRun", "build_report", "per_sample_rows", "run_selection"]
