"""Nothing the wheel ships imports a module the wheel leaves out.

The shipped packages are what setuptools' own ``find_packages`` returns for pyproject's
``[tool.setuptools.packages.find]``; every import statement of a shipped module counts (module
level, inside functions, under ``if TYPE_CHECKING``), read with :mod:`ast`, so an excluded
module cannot hide behind a lazy import and fail only in an installed wheel.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from setuptools import find_packages

from benchc_tests.unit.imports import imported

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the backport, where installed
    tomllib = pytest.importorskip("tomli")

REPO = Path(__file__).resolve().parents[2]
#: Top-level packages of this checkout whose modules are checked (shipped or not).
ROOTS = ("benchc", "benchc_tests")


def _modules(root: Path, packages: list[str]) -> dict[str, tuple[Path, str]]:
    """Module name -> (file, the package its relative imports resolve against)."""
    out: dict[str, tuple[Path, str]] = {}
    for package in packages:
        folder = root.joinpath(*package.split("."))
        for path in sorted(folder.glob("*.py")):
            name = package if path.stem == "__init__" else f"{package}.{path.stem}"
            out[name] = (path, package)
    return out


def shipped_and_left_out(root: Path, find: dict) -> tuple[dict, dict]:
    """(shipped modules, left-out modules) of ``root`` under the ``packages.find`` config."""
    shipped = find_packages(
        str(root), include=find.get("include", ("*",)), exclude=find.get("exclude", ())
    )
    every = find_packages(str(root), include=[f"{r}*" for r in ROOTS])
    ship = _modules(root, shipped)
    left = {k: v for k, v in _modules(root, every).items() if k not in ship}
    return ship, left


def bad_imports(shipped: dict, left_out: dict) -> list[str]:
    """``module:line imports target`` for each import of a left-out module by a shipped one."""
    known = {**shipped, **left_out}
    bad = []
    for mod, (path, pkg) in sorted(shipped.items()):
        bad += [f"{mod}:{n} imports {t}" for t, n in imported(path, pkg, known) if t in left_out]
    return bad


def _find_config() -> dict:
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    return pyproject["tool"]["setuptools"]["packages"]["find"]


def test_no_shipped_module_imports_a_left_out_one() -> None:
    shipped, left_out = shipped_and_left_out(REPO, _find_config())
    assert {"benchc.plugin", "benchc.testing.serve", "benchc.testing.degrade"} <= set(shipped)
    assert "benchc_tests.suite.test_cells" in shipped
    assert {"benchc.testing.dev.zoo", "benchc.testing.dev.tiny_families"} <= set(left_out)
    assert "benchc_tests.unit.test_shipped_imports" in left_out
    bad = bad_imports(shipped, left_out)
    assert not bad, "shipped modules import modules the wheel leaves out:\n" + "\n".join(bad)


def test_a_lazy_or_relative_import_of_a_left_out_module_is_found(tmp_path: Path) -> None:
    files = {
        "benchc/__init__.py": "",
        "benchc/lib.py": "def f():\n    from .dev import tool\n",
        "benchc/ok.py": "import benchc.lib\nfrom benchc import lib\n",
        "benchc/dev/__init__.py": "",
        "benchc/dev/tool.py": "from benchc import lib\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    find = {"include": ["benchc*"], "exclude": ["benchc.dev", "benchc.dev.*"]}
    shipped, left_out = shipped_and_left_out(tmp_path, find)
    assert set(shipped) == {"benchc", "benchc.lib", "benchc.ok"}
    assert bad_imports(shipped, left_out) == ["benchc.lib:2 imports benchc.dev.tool"]
