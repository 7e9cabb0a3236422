"""``load_backend``: one model string picks the backend."""

from __future__ import annotations

import pytest

from benchc.models.hf import HFBackend
from benchc.models.proxy import OpenAIProxyBackend
from benchc.models.registry import load_backend, register, schemes
from benchc_tests.unit.test_models_hf import tiny_model_dir


def test_openai_scheme_builds_the_proxy() -> None:
    b = load_backend("openai:gpt-4o-mini@https://api.example.com/v1", n_samples=7)
    assert isinstance(b, OpenAIProxyBackend)
    assert (b.model, b.base_url, b.n_samples) == ("gpt-4o-mini", "https://api.example.com/v1", 7)
    assert b.name == "gpt-4o-mini" and "n7" in b.fingerprint


def test_folder_and_hf_scheme_build_the_hf_backend() -> None:
    path = str(tiny_model_dir())
    a = load_backend(path, batch_size=3)
    b = load_backend(f"hf:{path}")
    assert isinstance(a, HFBackend) and isinstance(b, HFBackend)
    assert a.batch_size == 3 and a.fingerprint == b.fingerprint


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty model string"),
        ("openai:gpt-4o", "openai:<model>@<base_url>"),
        ("openai:", "nothing after 'openai:'"),
        ("nosuch:thing", "unknown backend scheme 'nosuch'"),
    ],
)
def test_bad_model_strings(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_backend(spec)


def test_register_rejects_a_second_factory_for_a_scheme() -> None:
    assert {"hf", "openai"} <= set(schemes())
    with pytest.raises(ValueError, match="already registered"):
        register("openai")(lambda rest, **kw: None)
