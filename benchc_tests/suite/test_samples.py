"""``--per-sample`` drill-down: one case per corruption x severity x sample, checked against
the sample in the cell snapshot's evidence with its own benign tolerance. Off by default
(deselected)."""

import pytest

from benchc.suite.cases import grid_evidence

pytestmark = pytest.mark.benchc_sample


def test_sample(benchc_sample_case, benchc_run, benchc_gate):
    cell, sample_id = benchc_sample_case
    benchc_gate.check_sample(cell, sample_id, grid_evidence(benchc_run, [cell]))
