"""The one chat turn benchc puts to any model, white-box or served (docs/spec.md §2).

Why one function: the white-box path renders its chat template locally, a server renders the
same template from the messages it receives, in the order their parts arrive. The two agree only
when both are given the same messages; a request that put the text before the image was scored
under a different prompt (accuracy 0.175 instead of 0.825 on `transformers serve`). So both
paths build their messages here: one user turn, the image part first, then the user text from
:func:`benchc.spec.format_question`; no system message (the template's own default applies on
both sides); thinking disabled where the template has the switch.
"""

from __future__ import annotations

from typing import Any, Final

#: Chat-template keyword arguments that turn thinking off where a template supports them
#: (white-box: passed when the template reads the variable; servers: ``chat_template_kwargs``).
NO_THINKING: Final[dict[str, Any]] = {"enable_thinking": False}

#: Part of the white-box template input standing for the image (the processor supplies pixels).
IMAGE_PART: Final[dict[str, Any]] = {"type": "image"}


def chat_messages(user_text: str, image_part: dict[str, Any] = IMAGE_PART) -> list[dict]:
    """The messages of one query: a single user turn, ``image_part`` first, then the text.

    ``image_part`` is ``{"type": "image"}`` for a local chat template and an OpenAI
    ``image_url`` part for a server; nothing else differs between the two paths.
    """
    return [{"role": "user", "content": [dict(image_part), {"type": "text", "text": user_text}]}]


def image_url_part(data_url: str | bytes) -> dict[str, Any]:
    """An OpenAI-style ``image_url`` content part for a ``data:`` (or http) URL (bytes: the
    served path's :class:`~benchc.models.client.Verbatim`, spliced into the JSON as it is)."""
    return {"type": "image_url", "image_url": {"url": data_url}}


def template_kwargs(chat_template: str | None) -> dict[str, Any]:
    """The :data:`NO_THINKING` switches a local template actually reads (none otherwise)."""
    template = chat_template or ""
    return {k: v for k, v in NO_THINKING.items() if k in template}


#: Names the served request layout in a black-box fingerprint: results scored under an older
#: layout (text part before the image) are never reused.
CHAT_VERSION: Final[str] = "chat-image-first"
