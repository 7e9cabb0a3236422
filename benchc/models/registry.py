"""Turn a ``--model`` string into a backend: one table of backends and their argument schemas.

Each :class:`BackendEntry` carries a scheme, a factory ``factory(rest, **standard_args)`` and the
``--model-args`` keys it accepts, so parsing ``--model-args`` and building the backend read the
same entry. :func:`resolve` reads a model string, first rule that applies:

1. a path that exists on disk is a checkpoint folder: ``hf``;
2. no ``:``, or a ``/`` before the first ``:``: a folder or hub id, ``hf``;
3. ``<scheme>:<rest>`` with a scheme named by an entry point of the group ``benchc.backends``
   (:data:`benchc.registry.BACKENDS`; its value is a factory or a :class:`Backend` subclass,
   called with ``rest`` first, its ``--model-args`` keys in ``model_args_schema``). benchc's
   own are entry points of its ``pyproject.toml`` like a third party's:
   ``hf:<folder or hub id>`` (:class:`~benchc.models.hf.HFBackend`) and
   ``openai:<model>@<base_url>`` (:class:`~benchc.models.proxy.OpenAIProxyBackend`);
4. ``<module.path>:<ClassName>``, an importable module and an identifier: that
   :class:`Backend` subclass, built as ``ClassName(**standard_args)``, its keys in its
   ``model_args_schema`` (lm-evaluation-harness and inspect_ai load backends the same way);
5. anything else is an unknown scheme, one error naming the known ones.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchc.models.args import HF_ARGS, OPENAI_ARGS, ArgSpec, typed_model_args
from benchc.models.base import Backend
from benchc.registry import BACKENDS, UnknownExtension

Factory = Callable[..., Backend]
#: The entry-point group backends register under (name = scheme), benchc's own included.
ENTRY_POINT_GROUP = BACKENDS.group


@dataclass(frozen=True)
class BackendEntry:
    """One backend: the scheme that selects it, ``factory(rest, **standard_args)``, and the
    ``--model-args`` keys it accepts (converted and checked before any model loads)."""

    scheme: str
    factory: Factory
    args: Mapping[str, ArgSpec]
    #: :attr:`Backend.computes_locally`; a factory says it with the same attribute.
    computes_locally: bool = True


def accepts(args: Mapping[str, ArgSpec]) -> Callable[[Factory], Factory]:
    """Decorator declaring the ``--model-args`` keys a backend factory accepts (its
    ``model_args_schema``, read like a :class:`Backend` subclass's)."""

    def deco(factory: Factory) -> Factory:
        factory.model_args_schema = dict(args)  # type: ignore[attr-defined]
        return factory

    return deco


def schemes() -> list[str]:
    """Registered scheme names (the entry points of ``benchc.backends``)."""
    return BACKENDS.names()


#: Keyword arguments the suite passes (when set) to whichever backend ``--model`` selects; every
#: registered factory accepts them all (``test_models_registry`` constructs each with them).
STANDARD_ARGS = ("revision", "trust_remote_code", "device", "dtype", "batch_size", "model_args")


def resolve(spec: str) -> tuple[BackendEntry, str]:
    """The entry ``spec`` selects and the part its factory gets (rules in the module doc)."""
    if not spec or not spec.strip():
        raise ValueError("empty model string; pass a folder, a hub id or '<scheme>:<...>'")
    head, sep, rest = spec.partition(":")
    if not sep or Path(spec).exists() or "/" in head:
        hf = _entry_point("hf")
        if hf is None:
            raise ValueError(BACKENDS.unknown("hf"))
        return hf, spec
    entry = _entry_point(head)
    if entry is not None:
        if not rest:
            raise ValueError(f"model string {spec!r} has nothing after '{head}:'")
        return entry, rest
    if _is_module_class(head, rest):
        return _class_entry(spec, head, rest), ""
    raise ValueError(
        f"unknown backend scheme {head!r} in {spec!r}; known: {', '.join(schemes())} (or an "
        f"entry point of {ENTRY_POINT_GROUP!r}, or '<module.path>:<BackendClass>')"
    )


def load_backend(spec: str, **kwargs: Any) -> Backend:
    """The backend for ``spec``; ``kwargs`` go to its factory (e.g. ``batch_size``,
    ``model_args`` = typed ``--model-args`` from :func:`parse_model_args`)."""
    entry, rest = resolve(spec)
    unknown = sorted(set(kwargs.get("model_args") or {}) - set(entry.args))
    if unknown:
        raise ValueError(
            f"unknown model args {', '.join(unknown)} for the {entry.scheme} backend; "
            f"known: {', '.join(sorted(entry.args)) or 'none'}"
        )
    return entry.factory(rest, **kwargs)


def parse_model_args(text: str | None, model: str) -> dict[str, Any]:
    """Typed ``--model-args`` for the backend ``model`` selects; ``ValueError`` names the key.
    Without any, nothing is resolved (a bad model string is the loader's error, not this)."""
    if text is None or not text.strip():
        return {}
    entry, _ = resolve(model)
    return typed_model_args(text, entry.args, entry.scheme)


def _entry_point(scheme: str) -> BackendEntry | None:
    """The ``benchc.backends`` entry point named ``scheme``, loaded, or None."""
    try:
        target = BACKENDS.load(scheme)  # the same distribution twice on sys.path: the first wins
    except UnknownExtension:
        return None
    if not callable(target):
        raise ValueError(
            f"entry point {scheme!r} of {ENTRY_POINT_GROUP!r} ({BACKENDS.value(scheme)}) is not "
            "a backend factory or Backend subclass"
        )
    return BackendEntry(
        scheme,
        target,
        dict(getattr(target, "model_args_schema", {})),
        bool(getattr(target, "computes_locally", True)),
    )


def _is_module_class(module: str, name: str) -> bool:
    """``module`` is a dotted name of an importable module and ``name`` an identifier."""
    if not name.isidentifier() or not all(p.isidentifier() for p in module.split(".")):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a missing parent package
        return False


def _class_entry(spec: str, module: str, name: str) -> BackendEntry:
    cls = getattr(importlib.import_module(module), name, None)
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        what = "not found" if cls is None else "not a benchc Backend subclass"
        raise ValueError(f"--model {spec!r}: {module}.{name} is {what}")

    def factory(_rest: str, **kwargs: Any) -> Backend:
        return cls(**kwargs)

    return BackendEntry(
        spec, factory, dict(cls.model_args_schema), bool(getattr(cls, "computes_locally", True))
    )


@accepts(HF_ARGS)
def hf(rest: str, **kwargs: Any) -> Backend:
    from benchc.models.hf import HFBackend

    return HFBackend(rest, **kwargs)


@accepts(OPENAI_ARGS)
def openai(
    rest: str,
    *,
    revision: str | None = None,
    trust_remote_code: bool = False,
    model_args: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Backend:
    """``device`` and ``dtype`` are the server's business and ignored; a hub revision or
    remote code cannot be honoured by a server, so they are errors."""
    from benchc.models.proxy import OpenAIProxyBackend

    if revision is not None:
        raise ValueError("--revision has no meaning for an openai: model (the server loads it)")
    if trust_remote_code:
        raise ValueError("--trust-remote-code has no meaning for an openai: model")
    kwargs.pop("device", None)
    kwargs.pop("dtype", None)
    for marker in ("@http://", "@https://"):
        model, sep, url = rest.partition(marker)
        if sep and model:
            return OpenAIProxyBackend(model, marker[1:] + url, **(model_args or {}), **kwargs)
    raise ValueError(
        f"'openai:{rest}' must look like 'openai:<model>@<base_url>', "
        "e.g. 'openai:gpt-4o@https://api.openai.com/v1'"
    )


openai.computes_locally = False  # type: ignore[attr-defined]
