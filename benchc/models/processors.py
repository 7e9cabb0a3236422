"""Loading a checkpoint's multimodal processor with the PIL image backend, image-only if need be.

benchc scores images, never video. In transformers 5.x every processor that declares a video
processor (Qwen-VL, LLaVA-OneVision, InternVL, SmolVLM, ...) needs torchvision to build it, and
torchvision's image processors move logits by up to 1.6e-4 against the PIL ones. So the
processor is loaded with ``backend="pil"``; when that fails because of the video processor, it is
assembled from its parts (PIL image processor, tokenizer, chat template, the processor's own
settings) without one. Never a silent fallback to another image backend: the backend in use is
reported (:func:`image_backend`) and enters the model fingerprint when it is not PIL.
"""

from __future__ import annotations

import inspect
import json
import logging
from functools import cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

#: The attribute every image-only processor leaves out.
VIDEO = "video_processor"


@cache
def image_only(cls: type) -> type:
    """A subclass of processor class ``cls`` without its video processor, same public name
    (so ``save_pretrained`` writes ``processor_class: <cls name>`` and it loads back as ``cls``)."""
    if VIDEO not in cls.get_attributes():
        return cls

    @classmethod  # type: ignore[misc]
    def get_attributes(klass: type) -> list[str]:
        return [a for a in cls.get_attributes() if a != VIDEO]

    def __reduce__(self: Any) -> tuple:  # pickled by its base class (processor workers)
        return _rebuild_image_only, (cls, self.__dict__)

    sub = type(
        cls.__name__,
        (cls,),
        {
            "get_attributes": get_attributes,
            VIDEO: None,
            "image_only": True,
            "__reduce__": __reduce__,
        },
    )
    sub.__module__ = cls.__module__
    sub.__doc__ = f"{cls.__name__} without a video processor (benchc scores images only)."
    return sub


def _rebuild_image_only(cls: type, state: dict) -> Any:
    sub = image_only(cls)
    obj = sub.__new__(sub)
    obj.__dict__.update(state)
    return obj


def load_processor(
    path: Path, spec: str, *, trust_remote_code: bool = False, **image_kwargs: Any
) -> Any:
    """The processor of checkpoint folder ``path`` (``spec`` names it in errors), PIL backend.

    ``image_kwargs`` (``max_pixels``, ``min_pixels``) go to the image processor; one it does not
    take is an error, never silently ignored.
    """
    from transformers import AutoProcessor

    try:
        processor = AutoProcessor.from_pretrained(
            str(path), backend="pil", trust_remote_code=trust_remote_code, **image_kwargs
        )
    except Exception as err:
        first = err
        try:
            processor = _assemble(path, trust_remote_code, image_kwargs)
        except Exception as err2:
            raise ValueError(
                f"checkpoint {spec!r}: cannot load its processor with the PIL image backend "
                f"({type(first).__name__}: {_line(first)}), nor assemble it image-only "
                f"({type(err2).__name__}: {_line(err2)})"
            ) from err2
        log.info("%s: processor assembled image-only (%s)", spec, _line(first))
    _check_pixels(processor, spec, image_kwargs)
    return processor


#: Image-processor kwarg -> the ``size`` entry it sets (Qwen-VL style processors).
_PIXEL_KEYS = {"max_pixels": "longest_edge", "min_pixels": "shortest_edge"}


def _check_pixels(processor: Any, spec: str, image_kwargs: dict[str, Any]) -> None:
    image_processor = getattr(processor, "image_processor", None)
    size = getattr(image_processor, "size", None)
    for key, value in image_kwargs.items():
        field = _PIXEL_KEYS.get(key)
        got = getattr(size, field, None) if size is not None and field else None
        if got is None and isinstance(size, dict) and field:
            got = size.get(field)
        if got != value and getattr(image_processor, key, None) != value:
            raise ValueError(
                f"checkpoint {spec!r}: its image processor "
                f"({type(image_processor).__name__}) does not take {key}"
            )


def _assemble(path: Path, trust_remote_code: bool, image_kwargs: dict[str, Any]) -> Any:
    """Processor class from the folder's configs, built from PIL image processor + tokenizer."""
    import transformers
    from transformers import AutoImageProcessor, AutoTokenizer

    settings = _processor_settings(path)
    name = settings.pop("processor_class", None) or _tokenizer_config(path).get("processor_class")
    if not name or not hasattr(transformers, name):
        raise ValueError(f"no known processor_class in {path} (found {name!r})")
    cls = image_only(getattr(transformers, name))
    image_processor = AutoImageProcessor.from_pretrained(
        str(path), backend="pil", trust_remote_code=trust_remote_code, **image_kwargs
    )
    tokenizer = AutoTokenizer.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    init = inspect.signature(cls.__init__).parameters  # the named settings it takes
    kwargs = {k: v for k, v in settings.items() if k in init and k not in cls.get_attributes()}
    if VIDEO in init:  # some processors (SmolVLM) require the argument, even as None
        kwargs[VIDEO] = None
    template = _chat_template_file(path)
    if template is not None:
        kwargs["chat_template"] = template
    return cls(image_processor=image_processor, tokenizer=tokenizer, **kwargs)


def _processor_settings(path: Path) -> dict[str, Any]:
    file = path / "processor_config.json"
    if not file.is_file():
        return {}
    data = json.loads(file.read_text())
    return {k: v for k, v in data.items() if not isinstance(v, dict) or k == "chat_template"}


def _tokenizer_config(path: Path) -> dict[str, Any]:
    file = path / "tokenizer_config.json"
    return json.loads(file.read_text()) if file.is_file() else {}


def _chat_template_file(path: Path) -> str | None:
    file = path / "chat_template.jinja"
    if file.is_file():
        return file.read_text()
    legacy = path / "chat_template.json"
    if legacy.is_file():
        return json.loads(legacy.read_text()).get("chat_template")
    return None


def render_chat(processor: Any, messages: list[dict], **kwargs: Any) -> str:
    """The chat-templated prompt text (generation prompt and ``kwargs`` as given).

    An image-only processor whose ``apply_chat_template`` reads its absent video processor
    (SmolVLM asks it for frame defaults) renders the same template through its tokenizer.
    """
    try:
        return processor.apply_chat_template(messages, tokenize=False, **kwargs)
    except AttributeError:
        if not getattr(processor, "image_only", False):
            raise
    return processor.tokenizer.apply_chat_template(
        messages, chat_template=processor.chat_template, tokenize=False, **kwargs
    )


def process_batch(
    processor: Any,
    images: list[list[Any]],
    prompts: list[str],
    add_special: bool,
    drop: frozenset[str] = frozenset(),
) -> dict:
    """The whole processor's tensors for one batch (one image list per prompt, padded), without
    the keys in ``drop``."""
    out = processor(
        images=images,
        text=list(prompts),
        padding=True,
        return_tensors="pt",
        add_special_tokens=add_special,
    )
    return {k: v for k, v in out.items() if k not in drop}


def image_backend(processor: Any) -> str:
    """``"pil"`` when the image processor is a PIL one, else its class name."""
    name = type(processor.image_processor).__name__
    return "pil" if name.endswith("Pil") else name


def _line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
