"""The suite's "changed since baseline": computed once where the model loaded, read everywhere.

Computed in the process that loads the model (each xdist worker, or the one process) right after
the pre-flight, kept in the config's stash (:data:`benchc.suite.keys.CHANGES`) and handed to the
xdist controller with the worker's results; the summary, the failing case's message, the report
and the exports read the same dict (:func:`benchc.gates.changes.baseline_changes`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchc.gates import changes
from benchc.suite.keys import CHANGES
from benchc.suite.session import SuiteSession


def candidate_identity(state: SuiteSession) -> dict[str, Any] | None:
    """The identity of the checkpoint this run loaded (None: it could not be read)."""
    from benchc.models.identity import checkpoint_identity
    from benchc.suite.provenance import portable

    try:
        return checkpoint_identity(state.backend, portable(state.cfg.model))
    except Exception:
        return None


def compute(config: pytest.Config, state: SuiteSession) -> dict[str, Any]:
    """Compare the candidate with its baseline's recorded identity; kept in the stash."""
    from benchc.gates.baselines import read_manifest

    identity = candidate_identity(state)
    root = getattr(getattr(state.backend, "source", None), "path", None)
    try:
        doc = changes.baseline_changes(
            read_manifest(state.baseline.folder),
            identity,
            candidate_root=Path(root) if root is not None else None,
        )
    except Exception as exc:  # never the run's verdict: one line says why nothing is listed
        note = f"the identities could not be compared ({type(exc).__name__}: {exc})"
        doc = {"recorded": True, "changes": [], "note": note}
    config.stash[CHANGES] = doc
    return doc


def refresh(config: pytest.Config, state: SuiteSession) -> None:
    """At the end of a run against a server, once more: what the server reported of itself
    (model id, fingerprint) is known only after its first answer."""
    if CHANGES in config.stash and state._backend is not None:
        if getattr(state.backend, "served", None):
            compute(config, state)


def of(config: pytest.Config | None) -> dict[str, Any] | None:
    """This run's changes (None: not computed: a recording, no model loaded here, or a gate
    checked outside a pytest session)."""
    stash = getattr(config, "stash", None)
    return None if stash is None else stash.get(CHANGES, None)


def summary_lines(config: pytest.Config) -> list[str]:
    return changes.summary_lines(of(config))


def look_first(config: pytest.Config | None) -> list[str]:
    """The failing case's "look first" line, as a list to splice into its message."""
    line = changes.look_first(of(config))
    return [line] if line else []


__all__ = ["candidate_identity", "compute", "look_first", "of", "refresh", "summary_lines"]
