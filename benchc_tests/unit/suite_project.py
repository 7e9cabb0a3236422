"""A pytester project laid out like this repository, shared by the plugin's end-to-end tests."""

from __future__ import annotations

from pathlib import Path

# pytester's in-process runs unload every module first imported inside them, and a C extension
# cannot be imported twice: the report's contour plots load contourpy, so load it out here.
import contourpy  # noqa: F401
import pytest

SUITE = Path(__file__).resolve().parents[1] / "suite"


def make_suite_project(pytester: pytest.Pytester) -> pytest.Pytester:
    """Root conftest loading the plugin, plus copies of the suite's case files under suite/."""
    pytester.makeconftest('pytest_plugins = ["benchc.plugin"]\n')
    target = pytester.mkpydir("suite")
    for path in SUITE.glob("test_*.py"):
        (target / path.name).write_text(path.read_text())
    return pytester


#: The embedded tiny model the plugin's end-to-end tests run.
MODEL = SUITE.parents[1] / "fixtures" / "tiny-vlm"


@pytest.fixture(scope="module", autouse=True)
def _heavy_modules_loaded():
    """Load torch, scikit-learn and the model out here: pytester's in-process runs unload every
    module first imported inside them (import into a test module to use)."""
    import sklearn.linear_model  # noqa: F401
    import torch  # noqa: F401

    from benchc.models import load_backend

    load_backend(str(MODEL))
