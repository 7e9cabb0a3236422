"""One way in for every extension: backends, executors, exporters and results stores.

Each kind is an entry-point group; an extension is an entry point of its distribution's
metadata (``[project.entry-points."benchc.executors"]`` in its ``pyproject.toml``), found by
name. benchc's own built-ins are entry points of benchc's distribution, declared in its
``pyproject.toml`` exactly as a third party declares its own; nothing registers in code.

=============  ======================  ===================================================
kind           group                   an entry point's value
=============  ======================  ===================================================
``backend``    ``benchc.backends``     ``factory(rest, **standard_args)`` or a ``Backend``
                                       subclass; its name is the ``--model`` scheme
``executor``   ``benchc.executors``    ``executor(state, *, vsi)``: a context manager
                                       yielding ``fill(entries)``; ``--executor=<name>``
``exporter``   ``benchc.exporters``    ``export(bundle, target, *, local_dir)`` -> where;
                                       ``--export=<name>=<target>``
``store``      ``benchc.stores``       an object with ``read(url) -> Path`` and
                                       ``write(root, url) -> (copied, kept)``; its name is
                                       the URL scheme of ``--from-store``/``benchc push``
=============  ======================  ===================================================

docs/guides/extending.md shows one of each. This module sits below every other package of
benchc: it imports none of them.
"""

from __future__ import annotations

import importlib.metadata
import sys
from typing import Any

#: kind -> entry-point group.
GROUPS: dict[str, str] = {
    "backend": "benchc.backends",
    "executor": "benchc.executors",
    "exporter": "benchc.exporters",
    "store": "benchc.stores",
    # test tooling, not an extension point: a wrapper around the backend ``--model`` selects
    # (``--benchc-degrade``'s, registered by :mod:`benchc.testing.degrade`)
    "wrapper": "benchc.wrappers",
}


#: (group, sys.path) -> that group's entry points, by name.
_SCANS: dict[tuple[str, tuple[str, ...]], dict[str, importlib.metadata.EntryPoint]] = {}


class ExtensionError(RuntimeError):
    """An extension cannot go on (a run computed elsewhere failed, a store refused): one line.
    The suite reports it as the run's usage error; extensions raise it or a subclass."""


class UnknownExtension(ValueError):
    """No extension of that kind has that name; the message names the known ones."""


class Registry:
    """The extensions of one kind: the entry points of its group, on the current ``sys.path``
    (read again when the path changes, so a distribution added to it is seen; of one distribution
    found twice, the first on the path wins). A name benchc's own distribution declares is
    benchc's: another package's entry point of the same name does not replace it."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.group = GROUPS[kind]

    def __repr__(self) -> str:
        return f"Registry({self.kind!r})"

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        """name -> entry point (the first of a name wins); read once per ``sys.path`` (a
        scan of every installed distribution takes ~15 ms)."""
        key = (self.group, tuple(sys.path))
        if key not in _SCANS:
            found = importlib.metadata.entry_points(group=self.group)
            own = [ep for ep in found if _dist_name(ep) == "benchc"]
            out: dict[str, importlib.metadata.EntryPoint] = {}
            for ep in [*own, *(ep for ep in found if _dist_name(ep) != "benchc")]:
                out.setdefault(ep.name, ep)
            _SCANS[key] = out
        return dict(_SCANS[key])

    def names(self) -> list[str]:
        return sorted(self.entry_points())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.entry_points()

    def value(self, name: str) -> str | None:
        """``module:attr`` the entry point ``name`` names, without loading it; None if absent."""
        ep = self.entry_points().get(name)
        return None if ep is None else ep.value

    def load(self, name: str) -> Any:
        """The object the entry point ``name`` names; :class:`UnknownExtension` naming the known
        entries otherwise."""
        ep = self.entry_points().get(name)
        if ep is None:
            raise UnknownExtension(self.unknown(name))
        return ep.load()

    def unknown(self, name: str) -> str:
        known = ", ".join(self.names())
        hint = "" if known else " (is benchc installed? pip install -e . writes its entry points)"
        return (
            f"unknown {self.kind} {name!r}; known: {known or 'none'}{hint} (a package adds one "
            f"with an entry point of the group {self.group!r})"
        )


def _dist_name(ep: importlib.metadata.EntryPoint) -> str | None:
    dist = ep.dist
    return None if dist is None else dist.metadata["Name"]


BACKENDS = Registry("backend")
EXECUTORS = Registry("executor")
EXPORTERS = Registry("exporter")
STORES = Registry("store")
WRAPPERS = Registry("wrapper")

__all__ = [
    "BACKENDS",
    "EXECUTORS",
    "EXPORTERS",
    "GROUPS",
    "STORES",
    "WRAPPERS",
    "ExtensionError",
    "Registry",
    "UnknownExtension",
]
