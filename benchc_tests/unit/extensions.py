"""A distribution installed into a temporary folder: a ``*.dist-info`` with ``entry_points.txt``
(and modules beside it) on ``sys.path``, read by :mod:`importlib.metadata` as any installed
package is. Extensions register this way only: no test touches a registry's internals."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

import pytest


def install(
    monkeypatch: pytest.MonkeyPatch,
    folder: Path,
    entry_points: Mapping[str, Mapping[str, str]],
    modules: Mapping[str, str] | None = None,
    name: str = "benchc-ext",
) -> Path:
    """Write ``modules`` (file name -> source) and a dist-info declaring ``entry_points``
    (group -> {name: "module:attr"}) into ``folder``, and put ``folder`` first on ``sys.path``
    for this test (the subprocesses it starts see it through ``PYTHONPATH``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for filename, source in (modules or {}).items():
        (folder / filename).write_text(source)
        # a module of that name another test installed: this folder's is imported afresh
        monkeypatch.delitem(sys.modules, Path(filename).stem, raising=False)
    dist = folder / f"{name.replace('-', '_')}-0.1.dist-info"
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "".join(
            f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
            for group, eps in entry_points.items()
        )
    )
    monkeypatch.syspath_prepend(str(folder))
    return folder
