"""A sequential gate: an UNRESOLVED look extended with more of the dataset's samples.

A gate run on ``--limit n`` compares the dataset's first n samples with the same samples of a
baseline recorded on all of them (docs/spec.md §6). When a gate is unresolved, its record says
how many samples would resolve it at the run's own paired variance (``resolve_n``) and how many
the baseline holds (``n_available``). Under ``--looks K`` the run's false-alarm budget is spent
evenly over at most K looks (:class:`benchc.gates.budget.ErrorBudget`: Bonferroni over looks,
which holds the family-wise error whatever the looks' dependence and whatever decides to take
the next one), so look k + 1 may take more samples without loosening any gate: this module
prints its command, which runs as printed.

Pure: the run's settings and its verdict records in, lines out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from benchc.suite.config import SuiteConfig
from benchc.suite.messages import command


def next_limit(records: Sequence[Mapping[str, Any]]) -> tuple[int, int] | None:
    """``(samples the next look takes, samples available)`` for the unresolved gates of a run
    that left samples unused; None when nothing is unresolved or nothing is left."""
    unresolved = [r for r in records if r.get("status") == "unresolved"]
    if not unresolved:
        return None
    n = max(int(r.get("n") or 0) for r in unresolved)
    available = min(int(r.get("n_available") or 0) for r in unresolved)
    if available <= n:
        return None
    wanted = max(int(r.get("resolve_n") or 0) for r in unresolved)
    return min(max(wanted, n + 1), available), available


def next_look(cfg: SuiteConfig, records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary lines after an UNRESOLVED look: the next look's command (more samples, the
    same budget per look), or why there is none."""
    nxt = next_limit(records)
    if nxt is None:
        return []
    take, available = nxt
    if cfg.looks <= 1:
        return [
            f"UNRESOLVED with {available} samples in the baseline: only a sequential gate may take "
            "more of them without spending more than the false-alarm budget; start a release's "
            "gate with --looks=K (e.g. --looks=2) so an unresolved look can be extended"
        ]
    if cfg.look >= cfg.looks:
        return [f"UNRESOLVED at the last look ({cfg.look} of {cfg.looks}): the verdict stands"]
    limit = None if take >= available else take
    return [
        f"next look ({cfg.look + 1} of {cfg.looks}) with {take} of the baseline's {available} "
        "samples, the same budget per look:",
        f"    {command(cfg, limit=limit, look=cfg.look + 1)}",
    ]


__all__ = ["next_limit", "next_look"]
