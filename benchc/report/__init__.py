"""The robustness report: one self-contained ``report.html`` plus a versioned ``report.json``.

data (:mod:`benchc.report.data`, numbers from a stored run, the threshold snapshots and the gate
verdicts) -> plots (:mod:`benchc.report.plots`, inline SVG) -> page
(:mod:`benchc.report.page`). :mod:`benchc.report.ci` holds the CI-native outputs.
"""

from benchc.report.compare import CompareError
from benchc.report.write import compare_runs, write_report

__all__ = ["CompareError", "compare_runs", "write_report"]
