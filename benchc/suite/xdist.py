"""What the plugin needs to know about pytest-xdist: which worker this is, how many there are,
and the one thing refused under several workers.

Read from the config only (``workerinput``, ``numprocesses``), so nothing here imports xdist:
the plugin works the same without it.
"""

from __future__ import annotations

import os

import pytest


def worker_id(config: pytest.Config) -> str | None:
    """``gw0``, ``gw1``, ... in an xdist worker; None in the controller or without xdist."""
    workerinput = getattr(config, "workerinput", None)
    return workerinput["workerid"] if workerinput else None


def worker_count(config: pytest.Config) -> int:
    """The ``-n`` this run was started with (0: no workers)."""
    n = config.getoption("numprocesses", None)
    if n in (None, 0):
        return 0
    if isinstance(n, int):
        return n
    return os.cpu_count() or 2  # "auto" / "logical"


def refuse_parallel_update(config: pytest.Config) -> None:
    """Re-recording baselines from several workers would race on the threshold files."""
    if config.getoption("update_snapshots", False) and worker_count(config) > 1:
        raise pytest.UsageError(
            "benchc: --snapshot-update under pytest-xdist with more than one worker is refused "
            "(workers would race on the threshold files); rerun with -n 0 or -p no:xdist"
        )
