"""Fixtures the plugin's end-to-end tests share (pytester projects laid out like this
repository: :mod:`benchc_tests.unit.suite_project`)."""

from __future__ import annotations

import pytest

from benchc_tests.unit.suite_project import make_suite_project


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return make_suite_project(pytester)


@pytest.fixture
def no_forward(monkeypatch):
    """Any model forward fails the test: what is wrong must be found before the model runs."""
    import benchc.models.hf

    def forbidden(*args, **kwargs):
        raise AssertionError("a model forward ran")

    monkeypatch.setattr(benchc.models.hf.HFBackend, "prompt_logprobs", forbidden)
