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


#: One model string per registered scheme; a new scheme must add one here.
EXAMPLES = {"hf": str(tiny_model_dir()), "openai": "openai:m@http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_every_registered_backend_takes_the_suites_standard_arguments(device: str) -> None:
    """The suite's own path (``open_backend``) with --device, --dtype, --batch-size set: no
    backend may reject an argument the suite passes (``openai:`` once did with ``device``)."""
    from benchc.models import registry
    from benchc.models.registry import STANDARD_ARGS
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import open_backend

    # benchc's own schemes (test modules may register fakes in the process-wide registry)
    builtin = [s for s in schemes() if registry._REGISTRY[s].__module__.startswith("benchc.")]
    assert set(builtin) <= set(EXAMPLES), "add an example model string for the new scheme"
    assert {"hf", "openai"} <= set(builtin)
    assert {"device", "dtype", "batch_size", "model_args"} <= set(STANDARD_ARGS)
    for scheme in builtin:
        cfg = SuiteConfig(model=EXAMPLES[scheme], device=device, dtype="float32", batch_size=2)
        backend = open_backend(cfg)
        assert backend.batch_size == 2, scheme
        # explicit capabilities, not inferred from errors
        caps = backend.capabilities
        assert caps.white_box == (scheme == "hf") and caps.vision_tower == (scheme == "hf")
        assert caps.full_distribution == (scheme == "hf")


def test_openai_rejects_what_a_server_cannot_honour() -> None:
    with pytest.raises(ValueError, match="--revision has no meaning"):
        load_backend(EXAMPLES["openai"], revision="abc")
    with pytest.raises(ValueError, match="unknown model args device_map for the openai backend"):
        load_backend(EXAMPLES["openai"], model_args={"device_map": "auto"})
