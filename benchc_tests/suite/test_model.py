"""Model-level gates over the whole selected grid, one case per gated figure of
:data:`benchc.gates.figures.FIGURES` (RAS, R_c, R_w, Mixed-cell rate, accuracy, consistency)."""

import pytest

from benchc.suite.cases import model_case

pytestmark = pytest.mark.benchc_model


def test_model(benchc_model_figure, benchc_run, benchc_gate):
    benchc_gate(model_case(benchc_run, benchc_model_figure, z_for=benchc_gate.z_for))
