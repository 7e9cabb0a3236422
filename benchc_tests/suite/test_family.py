"""Corruption-family gates (noise, blur, weather, photometric, digital): RAS, R_c, R_w and
accuracy over each family's selected cells, so a regression confined to one family fails here
even when no single cell and no model-level figure moves past its tolerance."""

import pytest

from benchc.suite.cases import family_case

pytestmark = pytest.mark.benchc_family


def test_family(benchc_family, benchc_run, benchc_gate):
    benchc_gate(family_case(benchc_run, benchc_family, z_for=benchc_gate.z_for))
