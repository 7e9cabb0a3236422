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
OPTIONAL = ("wandb", "mlflow", "huggingface_hub", "datasets")


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
