"""Layers that only look down: every import between benchc's top-level packages goes from a
higher floor to a lower one.

Read statically like ``test_import_cycles`` (every import statement counts: module level,
inside functions, under ``if TYPE_CHECKING``). A package reaches a higher one only through a
registry (:mod:`benchc.registry`'s entry points), never by name: the suite asks the executor
registry for ``ray`` and ``stored`` instead of importing :mod:`benchc.engine`, and the report
gets what it needs from the suite as a :class:`benchc.results.facts.SuiteFacts` the suite fills.
"""

from __future__ import annotations

from pathlib import Path

from benchc_tests.unit.test_import_cycles import REPO, import_graph

#: Floors, top first; a package may import its own floor's others only where ``SIDEWAYS`` says.
FLOORS: list[set[str]] = [
    {"cli", "plugin"},  # the two ways in: the `benchc` command, the pytest plugin
    {"testing"},  # test tooling (degrade wrapper, served models, the checkout's dev tools)
    {"engine"},  # executors beyond one process, built on the suite
    {"suite"},  # the pytest layer: options, session, collection, gates' wiring
    {"report", "export"},  # the report page and the exporters, from stored runs
    {"gates", "select", "tinyvlm"},
    {"corruptions", "models"},
    {"results"},
    {"metrics", "data"},
    {"provenance"},
    {"benchc", "spec", "fsutil", "registry", "errors"},  # `benchc` is the package's own __init__
]
#: Allowed edges inside one floor.
SIDEWAYS: set[tuple[str, str]] = set()


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "benchc"


def _floor(package: str) -> int:
    for i, floor in enumerate(FLOORS):
        if package in floor:
            return i
    raise AssertionError(f"benchc.{package} is in no floor of test_layers.FLOORS: add it")


def package_edges() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) top-level package -> the module imports making that edge."""
    graph = import_graph(REPO / "benchc", "benchc")
    out: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target, line in targets.items():
            a, b = _top(module), _top(target)
            if a != b:
                out.setdefault((a, b), []).append(f"{module}:{line} -> {target}")
    return out


def test_every_package_is_on_a_floor() -> None:
    packages = {p.stem for p in (REPO / "benchc").iterdir() if p.suffix == ".py" or p.is_dir()}
    packages = {"benchc" if p == "__init__" else p for p in packages if p != "__pycache__"}
    for package in packages:
        _floor(package)


def test_imports_only_look_down() -> None:
    upward = [
        f"{a} -> {b}: " + "; ".join(where)
        for (a, b), where in sorted(package_edges().items())
        if _floor(a) >= _floor(b) and (a, b) not in SIDEWAYS
    ]
    assert not upward, "imports from a lower (or the same) floor:\n" + "\n".join(upward)


def test_the_edges_the_issue_named_are_gone() -> None:
    edges = package_edges()
    for edge in [("suite", "engine"), ("suite", "testing"), ("report", "suite")]:
        assert edge not in edges, edges.get(edge)


def test_the_floors_are_not_vacuous() -> None:
    """The table is read: edges between floors exist and go down (a renamed package would
    otherwise leave the test passing on nothing)."""
    edges = package_edges()
    assert ("engine", "suite") in edges and ("suite", "results") in edges
    assert Path(REPO / "benchc" / "registry.py").is_file()
