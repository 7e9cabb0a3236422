"""The error model of dataset loading: where a record came from and what was wrong with it.

Shared by :mod:`benchc.data.validate` (record checks), :mod:`benchc.data.limits` (size, path and
text limits), the loaders and the suite's pre-run input checks, so each can raise a
:class:`SampleError` without importing the others.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The kinds of bad input a loader reports (the prefix of every ``Dataset.skipped`` reason).
ERROR_KINDS = (
    "missing_image",
    "undecodable_image",
    "answer_out_of_range",
    "bad_answer",
    "bad_option_count",
    "duplicate_id",
    "empty_question",
    "non_utf8",
    "bad_record",
    "bad_region",
    "path_outside_root",
    "text_too_long",
    "image_token_in_text",
    "image_too_large",
    "image_too_small",
    "image_too_thin",
    "prompt_too_long",
)


@dataclass(frozen=True)
class Location:
    """Where a record came from, for error messages."""

    file: str
    line: int | None = None
    sample_id: str | None = None
    #: ``"line"`` (1-based, text files) or ``"row"`` (0-based, Hugging Face datasets).
    unit: str = "line"

    def key(self) -> str:
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}, {self.unit} {self.line}"
        return f"{where}, sample {self.sample_id!r}" if self.sample_id is not None else where


class SampleError(ValueError):
    """A bad record. ``kind`` is one of :data:`ERROR_KINDS`; the message names the location."""

    def __init__(self, kind: str, location: Location, detail: str) -> None:
        self.kind = kind
        self.location = location
        self.detail = detail
        super().__init__(f"{location}: {kind}: {detail}")
