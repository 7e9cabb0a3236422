"""The code's references into the specification resolve: every ``docs/spec.md §N`` names a
section that docs/spec.md has, and no reference to the old external spec file remains."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPEC_DOC = REPO / "docs" / "spec.md"
#: Where the code that cites the specification lives.
CODE_DIRS = ("benchc", "benchc_tests", "benchmarks")
#: Bare references still allowed under these prefixes (none).
BARE_ALLOWED: tuple[str, ...] = ()

#: A section heading of docs/spec.md: ``## §3 Title``; subsections (``### ...``) are not cited.
HEADING = re.compile(r"^## §(\d+) \S", re.MULTILINE)
#: An explicit anchor line: ``<a id="s3"></a>``.
ANCHOR = re.compile(r'^<a id="s(\d+)"></a>$', re.MULTILINE)
#: A reference: ``docs/spec.md §2``, ``docs/spec.md §2 and §4``, ``docs/spec.md §1-§6``.
REFERENCE = re.compile(r"docs/spec\.md\s+(§\d+(?:\s*(?:-|,|/|and)\s*§\d+)*)")
#: The old forms: "SPEC 2", "SPEC section 5", "SPEC.md". Word-bounded, so names such as
#: ``SPECIAL_TOKENS`` do not count.
BARE = re.compile(r"\bSPEC(?:\.md)?\b")


def _sections() -> dict[int, str]:
    text = SPEC_DOC.read_text(encoding="utf-8")
    headings = [int(n) for n in HEADING.findall(text)]
    anchors = [int(n) for n in ANCHOR.findall(text)]
    assert headings == sorted(set(headings)), f"sections repeat or are out of order: {headings}"
    assert anchors == headings, f"each section needs its anchor: {anchors} vs sections {headings}"
    lines = text.splitlines()
    for n in headings:
        i = lines.index(f'<a id="s{n}"></a>')
        assert lines[i + 1].startswith(f"## §{n} "), f"anchor s{n} is not right above section §{n}"
    return {int(n): title for n, title in re.findall(r"^## §(\d+) (.+)$", text, re.MULTILINE)}


def _code_files() -> list[Path]:
    here = Path(__file__).resolve()
    files = [p for d in CODE_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    files.append(REPO / "conftest.py")
    return [p for p in files if p.exists() and p.resolve() != here]


def _lines(path: Path) -> list[tuple[int, str]]:
    return list(enumerate(path.read_text(encoding="utf-8").splitlines(), 1))


def test_spec_doc_has_the_six_anchored_sections() -> None:
    sections = _sections()
    assert sorted(sections) == [1, 2, 3, 4, 5, 6], sections
    for n, title in sections.items():
        assert title.strip(), f"§{n} has no title"


def test_every_code_reference_names_an_existing_section() -> None:
    sections = _sections()
    bad, found = [], 0
    for path in _code_files():
        for no, line in _lines(path):
            for ref in REFERENCE.finditer(line):
                for n in re.findall(r"§(\d+)", ref.group(1)):
                    found += 1
                    if int(n) not in sections:
                        bad.append(f"{path.relative_to(REPO)}:{no}: §{n} ({line.strip()})")
    assert found > 0, "no docs/spec.md reference found: is the pattern still right?"
    assert not bad, "references to sections docs/spec.md does not have:\n" + "\n".join(bad)


def test_no_bare_spec_references_remain() -> None:
    bad = []
    for path in _code_files():
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(BARE_ALLOWED):
            continue
        for no, line in _lines(path):
            if BARE.search(line):
                bad.append(f"{rel}:{no}: {line.strip()}")
    assert not bad, "bare SPEC references (write docs/spec.md §N instead):\n" + "\n".join(bad)


def test_bare_reference_pattern_spares_identifiers() -> None:
    assert BARE.search("fixed by SPEC 5") and BARE.search("see SPEC.md") and BARE.search("SPEC")
    assert not BARE.search("SPECIAL_TOKENS = ...") and not BARE.search("_QWEN_SPECIALS")
    assert REFERENCE.search("(docs/spec.md §2 and §4)").group(1) == "§2 and §4"
    assert REFERENCE.search("docs/spec.md §1-§6").group(1) == "§1-§6"
