"""The documented letter parser of the sampling proxy (docs/spec.md §3).

A reply maps to option index k, or to ``None`` (unparsable, counted and reported). Rules, tried
in order on the reply with surrounding whitespace, quotes, ``*`` and backticks removed:

1. Bare letter: the whole reply, or its first line, is one option letter, optionally in
   ``()``/``[]`` and followed by ``.``, ``)`` or ``:`` -- ``"B"``, ``"(B)"``, ``"b."``,
   ``"B\nBecause ..."``. Case-insensitive only here.
2. Leading letter: an uppercase option letter, then ``.``, ``)`` or ``:`` -- ``"B. blue"``,
   ``"B) blue"``; or then a space and that option's own text -- ``"B blue"``.
3. Stated answer: ``answer is X`` / ``answer: X`` / ``answer is (X)`` (any case for "answer",
   uppercase X); every such statement must name the same letter.
4. Option text: the reply, case-folded and without a final period, equals exactly one option.

A letter beyond the sample's K options never parses. Bump :data:`PARSER_VERSION` on any change:
it is part of the proxy fingerprint, so cached counts are invalidated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from benchc.spec import LETTERS

PARSER_VERSION = "letter-parser-2"

_STRIP = " \t\r\n\"'`*"
_BARE = re.compile(r"^[\(\[]?([A-Za-z])[\)\]]?[.):]?$")
_LEADING = re.compile(r"^[\(\[]?([A-Z])(?:[.):\]]|\s+(.*))", re.DOTALL)
_STATED = re.compile(r"answer\s*(?:is|:)?\s*:?\s*[\(\[]?([A-Z])\b", re.IGNORECASE)


def parse_letter(reply: str, options: Sequence[str]) -> int | None:
    """Option index named by ``reply`` under the rules above, or ``None``."""
    k = len(options)
    text = reply.strip(_STRIP)
    if not text:
        return None

    m = _BARE.match(text) or _BARE.match(text.splitlines()[0].strip(_STRIP))
    if m:
        return _index(m.group(1).upper(), k)

    m = _LEADING.match(text)
    if m:
        idx = _index(m.group(1), k)
        rest = m.group(2)
        if idx is not None and (rest is None or _same(rest, options[idx])):
            return idx

    stated = {
        g for g in (s.group(1) for s in _STATED.finditer(text)) if g.isupper() and g.isalpha()
    }
    if len(stated) == 1:
        return _index(stated.pop(), k)
    if len(stated) > 1:
        return None

    matches = [i for i, opt in enumerate(options) if _same(text, opt)]
    return matches[0] if len(matches) == 1 else None


def _index(letter: str, k: int) -> int | None:
    i = LETTERS.find(letter)
    return i if 0 <= i < k else None


def _same(a: str, b: str) -> bool:
    return a.strip(_STRIP).rstrip(".").casefold() == b.strip().rstrip(".").casefold()
