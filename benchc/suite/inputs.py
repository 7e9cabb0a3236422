"""Checks of the dataset against the run's settings and the loaded model, before any case runs.

Why: the docs promise one usage error before any case, not one traceback per case. The
loaders check what a dataset holds by itself (:mod:`benchc.data.limits`); what depends on the
run is checked here: the image's shorter side after resizing to ``--image-size`` (before the
model loads), and, once the model is loaded, the prompt length in tokens against the model's
context and the model's own special tokens (its image token above all) in any text field.
Under ``--lenient`` the offending samples are dropped and counted instead.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from PIL import Image

from benchc.data.errors import Location, SampleError
from benchc.data.fingerprint import fingerprint
from benchc.data.limits import check_for_image_size
from benchc.data.sample import Dataset, Sample


def _loc(dataset: Dataset, sample: Sample) -> Location:
    return Location(dataset.source or dataset.name, None, sample.id)


def _filter(
    dataset: Dataset, check: Callable[[Sample, Location], None], *, lenient: bool
) -> Dataset:
    """Apply ``check`` to every sample; strict raises the first error, lenient drops them."""
    keep: list[Sample] = []
    skipped = dict(dataset.skipped)
    for sample in dataset:
        try:
            check(sample, _loc(dataset, sample))
        except SampleError as err:
            if not lenient:
                raise
            skipped[f"{dataset.source or dataset.name}:{sample.id}"] = f"{err.kind}: {err}"
            continue
        keep.append(sample)
    if len(keep) == len(dataset):
        return dataset
    if not keep:
        raise ValueError(f"{dataset.name}: no valid samples left after the run's checks")
    return replace(dataset, samples=tuple(keep), fingerprint=fingerprint(keep), skipped=skipped)


def check_for_run(dataset: Dataset, image_size: int | None, *, lenient: bool = False) -> Dataset:
    """Every image keeps the minimum side at the run's image size (header only, no decode)."""

    def check(sample: Sample, loc: Location) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(sample.image_bytes)) as img:
                width, height = img.size
        check_for_image_size(width, height, image_size, loc)

    return _filter(dataset, check, lenient=lenient)


def _text_fields(sample: Sample) -> Iterator[tuple[str, str]]:
    yield "question", sample.question
    if sample.hint:
        yield "hint", str(sample.hint)
    for i, option in enumerate(sample.options):
        yield f"option {chr(65 + i)}", option


def _special_tokens(backend: Any) -> list[str]:
    """The model's special tokens that look like markup (``<...>``, ``[...]``), longest first."""
    tok = getattr(backend, "tokenizer", None)
    names: set[str] = set()
    for holder in (tok, getattr(backend, "processor", None)):
        for attr in ("image_token", "video_token", "boi_token", "eoi_token"):
            value = getattr(holder, attr, None)
            if isinstance(value, str) and value:
                names.add(value)
    names.update(getattr(tok, "all_special_tokens", None) or [])
    markup = {t for t in names if len(t) >= 3 and t[0] in "<[" and t[-1] in ">]"}
    return sorted(markup, key=len, reverse=True)


def _context_length(backend: Any) -> int | None:
    config = getattr(getattr(backend, "model", None), "config", None)
    if config is None:
        return None
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    value = getattr(text, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def prompt_tokens(backend: Any, sample: Sample) -> int | None:
    """Tokens of the chat-templated text prompt (image placeholders expanded as the
    processor does is model-specific; the text alone already bounds the length from below)."""
    tok = getattr(backend, "tokenizer", None)
    user_text = getattr(backend, "user_text", None)
    render = getattr(backend, "render", None)
    if tok is None or user_text is None or render is None:
        return None
    from benchc.models.base import Query

    query = Query(
        image=None, question=sample.question, options=sample.options, hint=sample.hint, id=sample.id
    )
    return len(tok(render(user_text(query)), add_special_tokens=False)["input_ids"])


def check_for_model(dataset: Dataset, backend: Any, *, lenient: bool = False) -> Dataset:
    """No text field holds one of the model's special tokens, and every prompt fits the
    model's context. Black-box backends (no tokenizer) are not checked."""
    specials = _special_tokens(backend)
    context = _context_length(backend)
    image_extra = int(getattr(getattr(backend, "processor", None), "image_seq_length", 0) or 0)

    def check(sample: Sample, loc: Location) -> None:
        for name, text in _text_fields(sample):
            hit = next((t for t in specials if t in text), None)
            if hit is not None:
                raise SampleError(
                    "image_token_in_text",
                    loc,
                    f"field {name!r} contains the model's special token {hit!r}; the processor "
                    "would read it as markup (an extra image, a turn boundary)",
                )
        if context is None:
            return
        n = prompt_tokens(backend, sample)
        if n is not None and n + image_extra > context:
            raise SampleError(
                "prompt_too_long",
                loc,
                f"prompt is {n} text tokens (+{image_extra} image tokens), longer than the "
                f"model's context of {context} tokens",
            )

    return _filter(dataset, check, lenient=lenient)
