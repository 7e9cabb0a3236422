"""The short option names (``--model``) beside the namespaced ones (``--benchc-model``).

benchc is an auto-loaded ``pytest11`` plugin: every pytest run of an environment that has it
installed parses its options. A repository whose own ``conftest.py`` declares ``--device`` or
``--model`` must keep them (argparse refuses two declarations of one name, and that would stop
every run of the repository). So only ``--benchc-<name>`` is declared at ``pytest_addoption``;
the short forms follow once the initial conftests have declared theirs, and only the names still
free. Where a name is taken, the suite answers to ``--benchc-<name>``.

Whether a name is free is asked through pytest's public ``Parser.parse_known_and_unknown_args``:
a free ``--name=0`` comes back unknown; a declared one is consumed or refused.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from benchc.suite.options import OPTIONS, Option

#: The ``benchc`` option group's title (``pytest --help``).
GROUP = "benchc"
GROUP_HELP = (
    "benchc structural-robustness suite (every --benchc-NAME also answers to --NAME, unless "
    "this repository declares --NAME itself; syrupy's --snapshot-update records the baseline "
    "from this run's figures into --thresholds-dir)"
)


def _unknown(parser: pytest.Parser, flags: list[str]) -> set[str] | None:
    """The flags the parser does not know; None when parsing refused one (it is declared)."""
    probes = [f"{flag}=0" for flag in flags]
    try:
        _, unknown = parser.parse_known_and_unknown_args(probes)
    except (Exception, SystemExit):  # a declared switch refuses "=0": the name is taken
        return None
    return {arg.partition("=")[0] for arg in unknown if arg in probes}


def free_flags(parser: pytest.Parser, flags: Iterable[str]) -> set[str]:
    """Which of ``flags`` no plugin or conftest has declared yet."""
    flags = list(flags)
    both = _unknown(parser, flags)
    if both is not None:
        return both
    return {f for f in flags if _unknown(parser, [f]) == {f}}


def add_short_forms(parser: pytest.Parser) -> list[Option]:
    """Declare each option's short form where it is free; returns the options that got one."""
    wanted = [o for o in OPTIONS if o.short]
    free = free_flags(parser, (o.short for o in wanted if o.short))
    group = parser.getgroup(GROUP, GROUP_HELP)
    added = [o for o in wanted if o.short in free]
    for opt in added:
        opt.add_to(group.addoption, opt.short, shown=False)  # type: ignore[arg-type]
    return added
