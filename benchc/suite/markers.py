"""The suite's own markers, declared wherever the plugin is installed (``--strict-markers``
holds in any repository), in a module light enough for every pytest run to import."""

from __future__ import annotations

import pytest

#: The suite's own markers (this checkout's opt-in markers are the root conftest's).
MARKERS = {
    "benchc_cell": "one (corruption, severity) cell of the robustness suite",
    "benchc_family": "a corruption-family gate (noise, blur, weather, photometric, digital)",
    "benchc_model": "a model-level robustness gate",
    "benchc_sample": "a per-sample drill-down case (--per-sample)",
    "benchc_case": "what a suite case covers: corruption, family, severity, figure, sample "
    "(select with -m \"benchc_case(family='blur')\" or -k family:blur)",
}
#: The id of the one placeholder case a ``--per-sample`` test gets without that option.
PER_SAMPLE_OFF = "per-sample-off"


def register_markers(config: pytest.Config) -> None:
    """``--strict-markers`` holds wherever the plugin is installed, not only in this checkout."""
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
