"""The payload of each kind of case, computed from a :class:`SuiteRun`.

Test functions in ``benchc_tests/suite`` stay one line long; everything they compute is here
and unit-testable without pytest.
"""

from __future__ import annotations

from typing import Any

from benchc.gates import Payload
from benchc.suite.figures import cell_payload, model_payload
from benchc.suite.run import SuiteRun


def run_info(run: SuiteRun, *, grid: bool = False) -> dict[str, Any]:
    """Settings that make two payloads comparable (see ``benchc.suite.gate.SETTINGS_KEYS``)."""
    info: dict[str, Any] = {
        "dataset_fingerprint": run.dataset.fingerprint,
        "image_size": run.image_size,
        "seed": run.cfg.seed,
    }
    if grid:
        info["conditions"] = list(run.cfg.conditions)
    return info


def cell_case(run: SuiteRun, key: str) -> Payload:
    """Figures of one (corruption, severity) cell over all samples."""
    return cell_payload(
        run.cell(key),
        scope=key,
        model=run.backend.name,
        dataset=run.dataset.name,
        ids=run.ids,
        info=run_info(run),
        seed=run.cfg.seed,
    )


def model_case(run: SuiteRun, figure: str) -> Payload:
    """One model-level figure over the selected grid."""
    return model_payload(
        run.grid(),
        figure,
        model=run.backend.name,
        dataset=run.dataset.name,
        ids=run.ids,
        info=run_info(run, grid=True),
        seed=run.cfg.seed,
    )


def vsi_case(run: SuiteRun, figure: str) -> Payload:
    """One VSI figure (insensitive fraction or encoder-LLM gap); raises
    :class:`benchc.suite.vsi.VSIUnavailable` for a backend without distributions or tower."""
    from benchc.suite.vsi import vsi_payload

    return vsi_payload(run.vsi(), figure, run=run)
