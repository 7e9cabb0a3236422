"""Turn a ``--model`` string into a backend, in the spirit of lm-eval's model registry.

``<scheme>:<rest>`` picks a registered factory by scheme; anything else (a folder or a hub id)
is a Hugging Face checkpoint. Built in:

- ``hf:<folder or hub id>`` or a bare folder / hub id -> :class:`~benchc.models.hf.HFBackend`
- ``openai:<model>@<base_url>`` -> :class:`~benchc.models.proxy.OpenAIProxyBackend`
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchc.models.base import Backend

Factory = Callable[..., Backend]
_REGISTRY: dict[str, Factory] = {}


def register(scheme: str) -> Callable[[Factory], Factory]:
    """Decorator registering ``factory(rest, **kw)`` for ``"<scheme>:<rest>"`` model strings."""

    def deco(factory: Factory) -> Factory:
        if scheme in _REGISTRY and _REGISTRY[scheme] is not factory:
            raise ValueError(f"backend scheme {scheme!r} is already registered")
        _REGISTRY[scheme] = factory
        return factory

    return deco


def schemes() -> list[str]:
    """Registered scheme names."""
    return sorted(_REGISTRY)


#: Keyword arguments the suite passes (when set) to whichever backend ``--model`` selects; every
#: registered factory accepts them all (``test_models_registry`` constructs each with them).
STANDARD_ARGS = ("revision", "trust_remote_code", "device", "dtype", "batch_size", "model_args")


def load_backend(spec: str, **kwargs: Any) -> Backend:
    """The backend for ``spec``; ``kwargs`` go to its constructor (e.g. ``batch_size``,
    ``model_args`` = typed ``--model-args`` from :func:`benchc.models.args.parse_model_args`)."""
    if not spec or not spec.strip():
        raise ValueError("empty model string; pass a folder, a hub id or '<scheme>:<...>'")
    scheme, sep, rest = spec.partition(":")
    if sep and scheme in _REGISTRY and not Path(spec).exists():
        if not rest:
            raise ValueError(f"model string {spec!r} has nothing after '{scheme}:'")
        return _REGISTRY[scheme](rest, **kwargs)
    if sep and not Path(spec).exists() and "/" not in scheme:
        raise ValueError(
            f"unknown backend scheme {scheme!r} in {spec!r}; known: {', '.join(schemes())}"
        )
    return _REGISTRY["hf"](spec, **kwargs)


@register("hf")
def _hf(rest: str, **kwargs: Any) -> Backend:
    from benchc.models.hf import HFBackend

    return HFBackend(rest, **kwargs)


@register("openai")
def _openai(
    rest: str,
    *,
    revision: str | None = None,
    trust_remote_code: bool = False,
    model_args: dict[str, Any] | None = None,
    **kwargs: Any,
) -> Backend:
    """``device`` and ``dtype`` are the server's business and ignored; a hub revision or
    remote code cannot be honoured by a server, so they are errors."""
    from benchc.models.args import OPENAI_ARGS
    from benchc.models.proxy import OpenAIProxyBackend

    if revision is not None:
        raise ValueError("--revision has no meaning for an openai: model (the server loads it)")
    if trust_remote_code:
        raise ValueError("--trust-remote-code has no meaning for an openai: model")
    args = dict(model_args or {})
    unknown = sorted(set(args) - set(OPENAI_ARGS))
    if unknown:
        raise ValueError(
            f"unknown model args {', '.join(unknown)} for the openai backend; "
            f"known: {', '.join(sorted(OPENAI_ARGS))}"
        )
    kwargs.pop("device", None)
    kwargs.pop("dtype", None)
    for marker in ("@http://", "@https://"):
        model, sep, url = rest.partition(marker)
        if sep and model:
            return OpenAIProxyBackend(model, marker[1:] + url, **args, **kwargs)
    raise ValueError(
        f"'openai:{rest}' must look like 'openai:<model>@<base_url>', "
        "e.g. 'openai:gpt-4o@https://api.openai.com/v1'"
    )
