"""The imports a module makes, read with ``ast`` (function-level and ``TYPE_CHECKING`` ones too),
resolved to modules of a known set: shared by the import-cycle and shipped-imports tests."""

from __future__ import annotations

import ast
from collections.abc import Collection
from pathlib import Path


def imported(path: Path, pkg: str, known: Collection[str]) -> list[tuple[str, int]]:
    """``(module, line)`` for each import in ``path`` (a module of package ``pkg``) of a module
    in ``known``: the longest known prefix of the imported name, a submodule when ``from x
    import sub`` names one."""

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        targets: list[str | None] = []
        if isinstance(node, ast.Import):
            targets = [resolve(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                targets.append(sub if sub in known else resolve(source))
        out += [(t, node.lineno) for t in targets if t is not None]
    return out
