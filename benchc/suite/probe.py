"""Pre-flight through the real path: one query on one clean sample before the grid.

A processor configured for 224 px in front of a 128 px vision tower loads fine and fails at the
first forward pass, then again in every case (the same ``ValueError`` 32 times, a 4,000-line
log). One query of the first sample through the backend's own ``forward``, before any case, turns
that into one usage error naming the setting. A preprocessing that changed but still works is no
error here: it is the candidate under test, named in "changed since baseline" and gated.
"""

from __future__ import annotations

from typing import Any

from benchc.suite.session import LoadError, SuiteSession

#: The most lines a pre-flight error prints (the exception's own text is cut to fit).
MAX_LINES = 20


def _size_of(value: Any) -> tuple[int, int] | None:
    """A processor ``size`` (``{"height", "width"}``, ``{"shortest_edge"}``, an int) as (h, w)."""
    if isinstance(value, int):
        return value, value
    get = value.get if isinstance(value, dict) else lambda k: getattr(value, k, None)
    h, w = get("height"), get("width")
    if isinstance(h, int) and isinstance(w, int):
        return h, w
    edge = get("shortest_edge")
    return (edge, edge) if isinstance(edge, int) else None


def size_mismatch(backend: Any) -> str | None:
    """The processor's image size against the vision tower's ``image_size``, when they differ."""
    image_processor = getattr(getattr(backend, "processor", None), "image_processor", None)
    config = getattr(getattr(backend, "model", None), "config", None)
    vision = getattr(config, "vision_config", None)
    model_size = getattr(vision, "image_size", None)
    if image_processor is None or not isinstance(model_size, int):
        return None
    crop = getattr(image_processor, "do_center_crop", False)
    key = "crop_size" if crop else "size"
    size = _size_of(getattr(image_processor, key, None))
    if size is None or size == (model_size, model_size):
        return None
    return (
        f"the processor's image_processor.{key} is {size[0]}x{size[1]} px, the model's "
        f"vision_config.image_size is {model_size} px: set {key} to "
        f'{{"height": {model_size}, "width": {model_size}}} in the checkpoint\'s processor '
        "config (processor_config.json or preprocessor_config.json)"
    )


def first_query(state: SuiteSession) -> Any:
    """The first sample's clean query, its image prepared as the run prepares it."""
    from benchc.data.images import prepare
    from benchc.models.base import Query

    sample = state.dataset.samples[0]
    image = prepare(sample.image(), state.cfg.resolved_image_size(), what=f"sample {sample.id!r}")
    return Query(
        image=image, question=sample.question, options=sample.options, hint=sample.hint,
        id=sample.id,
    )  # fmt: skip


def probe(state: SuiteSession) -> None:
    """One forward pass of one clean sample; a :class:`LoadError` of at most :data:`MAX_LINES`
    lines naming the setting when the model cannot take its input. Only for a model computed
    here (a server is asked by the run itself; ``--from-store`` and Ray compute nothing here)."""
    cfg = state.cfg
    if cfg.from_store is not None or cfg.executor != "local":
        return
    backend = state.backend
    if not getattr(backend, "computes_locally", False):
        return
    query = first_query(state)
    try:
        backend.forward([query])
    except Exception as exc:
        raise LoadError(message(cfg.model, query.id, exc, size_mismatch(backend))) from None


def message(model: str, sample: str | None, exc: Exception, setting: str | None) -> str:
    """The pre-flight's usage error: what failed, the setting that explains it, the error."""
    text = [line for line in str(exc).splitlines() if line.strip()] or [""]
    head = [
        f"--model {model!r} cannot take its input: pre-flight query of sample {sample!r} (clean) "
        f"failed before the grid: {type(exc).__name__}: {text[0][:300]}"
    ]
    if setting:
        head.append(f"  cause: {setting}")
    rest = [f"  {line[:200]}" for line in text[1:]]
    room = MAX_LINES - len(head)
    if len(rest) > room:
        rest = [*rest[: room - 1], f"  ... ({len(rest) - room + 1} more lines)"]
    return "\n".join(head + rest)


__all__ = ["MAX_LINES", "first_query", "message", "probe", "size_mismatch"]
