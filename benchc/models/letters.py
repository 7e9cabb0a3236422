"""Which vocabulary entries spell an option letter (docs/spec.md §2).

A model may answer ``A`` as the bare token ``A`` or with a leading space (``" A"``, spelled
``"▁A"`` in SentencePiece vocabularies and ``"ĠA"`` in byte-level BPE). The option logit sums
(logsumexp) over every such single-token variant, so a tokenizer quirk cannot move probability
mass off a letter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from benchc.spec import LETTERS

#: Raw vocabulary spellings tried for a letter ``L`` (``{}`` is replaced by ``L``).
RAW_SPELLINGS: tuple[str, ...] = ("{}", " {}", "▁{}", "Ġ{}")
#: Surface texts a variant may decode to: the letter alone or after one space.
SURFACE_TEXTS: tuple[str, ...] = ("{}", " {}")


def letter_variants(tokenizer: Any, letter: str) -> tuple[int, ...]:
    """Sorted ids of every single token that decodes to ``letter`` or ``" " + letter``.

    Candidates come from the raw spellings in :data:`RAW_SPELLINGS` and from encoding the two
    surface texts; each is kept only if it is one known token (not the unknown token) whose
    decoded text is the letter, optionally after one leading space. Returns ``()`` when none.
    """
    vocab: Mapping[str, int] = tokenizer.get_vocab()
    unk = getattr(tokenizer, "unk_token_id", None)
    candidates: set[int] = set()
    for spelling in RAW_SPELLINGS:
        tid = vocab.get(spelling.format(letter))
        if tid is not None:
            candidates.add(int(tid))
    for text in SURFACE_TEXTS:
        ids = tokenizer.encode(text.format(letter), add_special_tokens=False)
        if len(ids) == 1:
            candidates.add(int(ids[0]))
    allowed = {s.format(letter) for s in SURFACE_TEXTS}
    kept = []
    for tid in candidates:
        if unk is not None and tid == unk:
            continue
        decoded = tokenizer.decode(
            [tid], skip_special_tokens=False, clean_up_tokenization_spaces=False
        )
        if decoded in allowed:
            kept.append(tid)
    return tuple(sorted(kept))


def resolve_letters(tokenizer: Any, letters: Iterable[str] = LETTERS) -> dict[str, tuple[int, ...]]:
    """Variants for each letter; letters without any single-token variant map to ``()``.

    Missing letters are not an error here because a tokenizer may lack a letter that no sample
    uses; :func:`require_letters` raises when a sample actually needs it.
    """
    return {letter: letter_variants(tokenizer, letter) for letter in letters}


def require_letters(table: Mapping[str, tuple[int, ...]], k: int, *, what: str = "a query") -> None:
    """Raise ``ValueError`` if any of the first ``k`` letters has no single-token variant."""
    missing = [LETTERS[i] for i in range(k) if not table.get(LETTERS[i])]
    if missing:
        tried = ", ".join(repr(s.format(missing[0])) for s in RAW_SPELLINGS)
        raise ValueError(
            f"{what} has {k} options but the tokenizer has no single-token variant of letter(s) "
            f"{', '.join(missing)} (tried {tried}"
            " and encoding the letter with and without a leading space); "
            "this model cannot be scored by option-letter logits"
        )
