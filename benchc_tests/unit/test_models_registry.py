"""``load_backend``: one model string picks the backend."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from benchc.models.args import ArgSpec
from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.hf import HFBackend
from benchc.models.proxy import OpenAIProxyBackend
from benchc.models.registry import (
    ENTRY_POINT_GROUP,
    load_backend,
    parse_model_args,
    resolve,
    schemes,
)
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
        # module:Class errors name what is wrong
        ("json:JSONDecoder", "json.JSONDecoder is not a benchc Backend subclass"),
        ("json:NoSuchThing", "json.NoSuchThing is not found"),
        ("no_such_module.sub:Thing", "unknown backend scheme 'no_such_module.sub'"),
        ("nosuch:thing", "or '<module.path>:<BackendClass>'"),
    ],
)
def test_bad_model_strings(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        load_backend(spec)


def test_builtin_backends_are_entry_points_of_benchcs_own_distribution() -> None:
    from benchc.registry import BACKENDS

    assert {"hf", "openai"} <= set(schemes())
    for scheme in ("hf", "openai"):
        ep = BACKENDS.entry_points()[scheme]
        assert ep.dist is not None and ep.dist.metadata["Name"] == "benchc"
        assert ep.value == f"benchc.models.registry:{scheme}"


#: One model string per registered scheme; a new scheme must add one here.
EXAMPLES = {"hf": str(tiny_model_dir()), "openai": "openai:m@http://127.0.0.1:9/v1"}


@pytest.mark.parametrize("device", ["cpu", "auto"])
def test_every_registered_backend_takes_the_suites_standard_arguments(device: str) -> None:
    """The suite's own path (``open_backend``) with --device, --dtype, --batch-size set: no
    backend may reject an argument the suite passes (``openai:`` once did with ``device``)."""
    from benchc.models.registry import STANDARD_ARGS
    from benchc.registry import BACKENDS
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import open_backend

    # benchc's own schemes (a test may put another distribution's entry points on sys.path)
    builtin = [s for s in schemes() if str(BACKENDS.value(s)).startswith("benchc.")]
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


class EchoBackend(Backend):
    """A third-party backend defined outside benchc: ``--model=<this module>:EchoBackend``
    builds it from the standard arguments alone; as an entry point it gets the rest first."""

    model_args_schema: ClassVar[dict[str, ArgSpec]] = {
        "offset": ArgSpec(int, "backend", True, "added to option 0's logit")
    }

    def __init__(self, rest: str = "echo", *, batch_size: int = 4, **standard: Any) -> None:
        self.rest, self.batch_size, self.standard = rest, batch_size, standard
        self.offset = (standard.get("model_args") or {}).get("offset", 0)
        self.name, self.fingerprint = rest, f"echo:{rest}:{self.offset}"

    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        logits = np.zeros((len(queries), 4), np.float32)
        logits[:, 0] = self.offset
        return BatchOutput(logits, np.ones(len(queries), np.float32))


def echo_factory(rest: str, **standard: Any) -> Backend:
    """An entry point's value may be a plain factory, its keys on ``model_args_schema``."""
    return EchoBackend(f"fn-{rest}", **standard)


echo_factory.model_args_schema = EchoBackend.model_args_schema  # type: ignore[attr-defined]

ECHO = f"{__name__}:EchoBackend"


def test_module_colon_class_builds_that_backend_with_the_standard_arguments() -> None:
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import open_backend

    assert parse_model_args("offset=3", ECHO) == {"offset": 3}
    with pytest.raises(
        ValueError, match=f"unknown key 'bad' for the {ECHO} backend; known: offset"
    ):
        parse_model_args("bad=1", ECHO)
    cfg = SuiteConfig(
        model=ECHO, device="cpu", dtype="float32", batch_size=2, model_args={"offset": 3}
    )
    backend = open_backend(cfg)
    assert isinstance(backend, EchoBackend) and type(backend) is EchoBackend
    assert (backend.rest, backend.batch_size, backend.offset) == ("echo", 2, 3)
    assert backend.standard == {"device": "cpu", "dtype": "float32", "model_args": {"offset": 3}}
    with pytest.raises(ValueError, match=r"unknown model args nope for the .*:EchoBackend backend"):
        load_backend(ECHO, model_args={"nope": 1})


def test_folders_and_hub_ids_with_a_colon_stay_hf(tmp_path: Path) -> None:
    folder = tmp_path / "ckpt:v2"
    folder.mkdir()
    for spec in (str(folder), "org/name:weird", "org/model"):
        entry, rest = resolve(spec)
        assert (entry.scheme, rest) == ("hf", spec)
    assert resolve("hf:org/model")[1] == "org/model"
    assert resolve("openai:m@http://h/v1")[0].scheme == "openai"


@pytest.fixture
def echo_distribution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed distribution declaring ``benchc.backends`` entry points (a dist-info folder
    on ``sys.path``, read by importlib.metadata as any installed package is)."""
    dist = tmp_path / "benchc_echo-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: benchc-echo\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\n"
        f"echo = {__name__}:EchoBackend\n"
        f"echofn = {__name__}:echo_factory\n"
        f"openai = {__name__}:echo_factory\n"  # a registered scheme wins over an entry point
        f"broken = {__name__}:ECHO\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.usefixtures("echo_distribution")
def test_entry_point_backends_are_found_by_scheme() -> None:
    a = load_backend("echo:first", batch_size=3, model_args={"offset": 2})
    assert isinstance(a, EchoBackend) and (a.rest, a.batch_size, a.offset) == ("first", 3, 2)
    b = load_backend("echofn:second")
    assert isinstance(b, EchoBackend) and b.rest == "fn-second"
    assert parse_model_args("offset=5", "echofn:x") == {"offset": 5}
    with pytest.raises(ValueError, match="unknown key 'concurrency' for the echo backend"):
        parse_model_args("concurrency=2", "echo:x")
    assert isinstance(load_backend("openai:m@http://127.0.0.1:9/v1"), OpenAIProxyBackend)
    with pytest.raises(ValueError, match="nothing after 'echo:'"):
        load_backend("echo:")
    with pytest.raises(ValueError, match="is not a backend factory or Backend subclass"):
        load_backend("broken:x")
    assert "echo" in schemes()  # discovered from the path, per call
