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
