"""``--per-sample`` drill-down: one case per corruption x severity x sample, checked against
the per-sample values stored in the cell's threshold snapshot. Off by default (deselected)."""

import pytest

from benchc.suite.cases import sample_case

pytestmark = pytest.mark.benchc_sample


def test_sample(benchc_sample_case, benchc_run, benchc_gate):
    cell, sample_id = benchc_sample_case
    benchc_gate.check_sample(sample_case(benchc_run, cell, sample_id), cell)
