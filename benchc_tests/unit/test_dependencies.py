"""What the wheel needs at run time: test-only libraries stay in the dev extra, and the
exporters' and Hub datasets' libraries are imported only where they are used."""

from __future__ import annotations

import ast
import sys

import pytest

from benchc_tests.unit.imports import imported
from benchc_tests.unit.test_shipped_imports import REPO, _find_config, shipped_and_left_out

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the backport, where installed
    tomllib = pytest.importorskip("tomli")

#: Used by the tests only: in the dev extra, never imported by a shipped module.
TEST_ONLY = ("hypothesis",)
#: Optional libraries (extras): never imported when a shipped module is imported.
OPTIONAL = ("wandb", "mlflow", "huggingface_hub", "datasets", "ray", "fsspec")


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _names(requirements: list[str]) -> set[str]:
    return {r.split(";")[0].split("[")[0].split(">")[0].split("=")[0].strip() for r in requirements}


def test_test_only_libraries_are_dev_extras_and_never_shipped_imports():
    project = _pyproject()["project"]
    runtime = _names(project["dependencies"])
    dev = _names(project["optional-dependencies"]["dev"])
    for name in TEST_ONLY:
        assert name not in runtime and name in dev, name
    shipped, _ = shipped_and_left_out(REPO, _find_config())
    bad = [
        f"{mod}:{line} imports {target}"
        for mod, (path, pkg) in shipped.items()
        for target, line in imported(path, pkg, TEST_ONLY)
    ]
    assert not bad


def test_exporter_extras_are_declared():
    extras = _pyproject()["project"]["optional-dependencies"]
    assert _names(extras["wandb"]) == {"wandb"}
    assert _names(extras["mlflow"]) == {"mlflow-skinny"}
    assert _names(extras["hub"]) == {"huggingface_hub"}


def test_optional_libraries_are_imported_lazily():
    """A module-level import of an extra's library would break ``import benchc...`` for every
    user without that extra."""
    shipped, _ = shipped_and_left_out(REPO, _find_config())
    bad = []
    for mod, (path, _pkg) in shipped.items():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # module level only
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            bad += [f"{mod}:{node.lineno} {n}" for n in names if n.split(".")[0] in OPTIONAL]
    assert not bad


#: Imported by shipped code without being declared: guarded by ``except ImportError``.
GUARDED = {"threadpoolctl"}  # ships with scikit-learn; without it the pool is not capped
#: Import name -> distribution where the import name says nothing (and it may not be installed).
DISTRIBUTIONS = {"mlflow": ["mlflow-skinny"], "cv2": ["opencv-python"], "PIL": ["pillow"]}


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def test_every_library_shipped_code_imports_is_declared():
    """A library benchc imports, at module level or in a function, is a dependency of its own
    or an extra's: not a dependency's dependency that a release of it may drop."""
    from importlib.metadata import packages_distributions

    project = _pyproject()["project"]
    declared = {_normal(n) for n in _names(project["dependencies"])}
    for extra in project["optional-dependencies"].values():
        declared |= {_normal(n) for n in _names(extra)}
    installed = packages_distributions()
    shipped, _ = shipped_and_left_out(REPO, _find_config())
    tops: dict[str, str] = {}
    for mod, (path, _pkg) in shipped.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                tops.setdefault(name.split(".")[0], f"{mod}:{node.lineno}")
    undeclared = []
    for top, where in sorted(tops.items()):
        if top in sys.stdlib_module_names or top == "benchc" or top in GUARDED:
            continue
        dists = DISTRIBUTIONS.get(top) or installed.get(top) or [top]
        if not any(_normal(d) in declared for d in dists):
            undeclared.append(f"{where} imports {top} ({', '.join(dists)})")
    assert not undeclared
