"""Model-level VSI gates: insensitive fraction and encoder-LLM gap (SPEC 5), region blur with
the dataset's regions (whole-image fallbacks counted in the snapshot's ``info``)."""

import pytest

from benchc.suite.cases import vsi_case
from benchc.suite.vsi import VSIUnavailable

pytestmark = pytest.mark.benchc_model


def test_vsi(benchc_vsi_figure, benchc_run, benchc_gate):
    try:
        payload = vsi_case(benchc_run, benchc_vsi_figure)
    except VSIUnavailable as exc:  # black-box backends: VSI is not defined for them
        pytest.skip(f"VSI not applicable: {exc}")
    benchc_gate(payload)
