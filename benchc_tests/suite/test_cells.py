"""The robustness suite, one case per (corruption, severity) cell.

Each case scores every sample under its cell (resumably, through the results store), computes
the cell's Bench-C figures and checks them, paired, against
``thresholds/<model>/test_cell-<corruption>-<severity>.json``. ``-k blur`` selects a family.
"""

import pytest

from benchc.suite.cases import cell_case

pytestmark = pytest.mark.benchc_cell


def test_cell(benchc_cell, benchc_run, benchc_gate):
    benchc_gate(cell_case(benchc_run, benchc_cell, z_for=benchc_gate.z_for))
