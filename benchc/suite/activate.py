"""When the suite takes part in a pytest run, and building its session then.

Installed, benchc's plugin is in every pytest run of the environment. A run that gives no benchc
option, names no suite folder (``benchc_tests/suite``, a folder above it, ``--pyargs
benchc_tests.suite``) and runs where no conftest lists ``benchc.plugin`` in ``pytest_plugins``
imports nothing beyond the option table and builds nothing: the suite's state, torch and the
dataset load only for the suite. A suite case collected some other way still builds the session
on first use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from benchc.suite.keys import ERRORED, PROBLEMS, RUN_DIRS, SESSION, VERDICTS
from benchc.suite.options import given_explicitly

#: The plugin's module name (its ``pytest11`` entry point's name too).
PLUGIN = "benchc.plugin"

if TYPE_CHECKING:
    from benchc.suite.session import SuiteSession


def suite_requested(config: pytest.Config) -> bool:
    """A benchc option was given, or the command line names the suite's folder (or a folder
    above it, or ``--pyargs benchc_tests.suite``)."""
    if given_explicitly(config.getoption) or _declared_by_a_conftest(config):
        return True
    from importlib.util import find_spec

    spec = find_spec("benchc_tests.suite")
    if spec is None or not spec.submodule_search_locations:
        return False
    suite = Path(next(iter(spec.submodule_search_locations))).resolve()
    for arg in config.args:
        name = str(arg).split("::", 1)[0]
        if config.option.pyargs and (name + ".").startswith("benchc_tests."):
            if name in ("benchc_tests", "benchc_tests.suite") or name.startswith(
                "benchc_tests.suite."
            ):
                return True
            continue
        path = (Path(config.invocation_params.dir) / name).resolve()
        if path == suite or suite in path.parents or path in suite.parents:
            return True
    return False


def _declared_by_a_conftest(config: pytest.Config) -> bool:
    """A conftest that lists ``benchc.plugin`` in its ``pytest_plugins`` (as this checkout's
    root conftest does) opts its repository into the suite."""
    for plugin in config.pluginmanager.get_plugins():
        declared = getattr(plugin, "pytest_plugins", None)
        declared = [declared] if isinstance(declared, str) else declared
        if isinstance(declared, (list, tuple)) and PLUGIN in declared:
            return True
    return False


def activate(config: pytest.Config) -> SuiteSession:
    """Build the suite's session (options checked: one usage error on a bad one)."""
    if SESSION in config.stash:
        return config.stash[SESSION]
    from benchc.suite import xdist
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import SuiteSession, quiet_progress_bars

    with usage_error():
        cfg = SuiteConfig.from_options(
            config.getoption, rootdir=Path(config.rootpath), worker_id=xdist.worker_id(config)
        )
    xdist.refuse_parallel_update(config)
    from dataclasses import replace

    from benchc.provenance import command_line

    # provenance: the command this session was started with (pytest.main in a process too)
    cfg = replace(cfg, command_line=command_line(config.invocation_params.args))
    state = SuiteSession(cfg)
    config.stash[RUN_DIRS] = set()
    config.stash[VERDICTS] = []
    config.stash[ERRORED] = []
    config.stash[PROBLEMS] = []
    config.stash[SESSION] = state
    from benchc.suite.overall import count_progress

    count_progress(config)
    if config.get_verbosity() < 0:  # -q: no weight-loading bars
        quiet_progress_bars()
    return state


@contextlib.contextmanager
def usage_error() -> Iterator[None]:
    """A bad option, model or dataset: one ``ERROR: benchc: ...`` line, no traceback."""
    from benchc.suite.config import ConfigError
    from benchc.suite.session import LoadError

    try:
        yield
    except (ConfigError, LoadError) as exc:
        raise pytest.UsageError(f"benchc: {exc}") from None
