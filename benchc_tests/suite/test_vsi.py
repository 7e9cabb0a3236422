"""VSI gates (docs/spec.md §5): insensitive fraction and encoder-LLM gap on the VSI set (the
embedded 1000-sample set by default, ``--vsi-dataset`` otherwise), region blur with the
dataset's regions (whole-image fallbacks counted in the snapshot's ``info``)."""

import pytest

from benchc.suite.cases import vsi_case
from benchc.suite.vsi import VSIUnavailable

pytestmark = pytest.mark.benchc_model


def test_vsi(benchc_vsi_figure, benchc_vsi_run, benchc_gate, pytestconfig):
    try:
        payload = vsi_case(benchc_vsi_run, benchc_vsi_figure, z_for=benchc_gate.z_for)
    except VSIUnavailable as exc:  # black-box backends: VSI is not defined for them
        if benchc_gate.strict:
            pytest.fail(f"VSI gate cannot be checked (--strict-gates): {exc}", pytrace=False)
        benchc_gate.unchecked("vsi", benchc_vsi_figure, f"VSI not applicable: {exc}")
        pytest.skip(f"VSI not applicable: {exc}")
    benchc_gate(payload)
