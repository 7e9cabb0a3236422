"""What a report needs from the suite about a stored run, as one small object the suite fills.

The report (:mod:`benchc.report`) sits below the suite and imports none of it: the run's notes
as its folder still shows them, the gates' verdicts re-checked offline and the command that
re-records a baseline are the suite's code, handed down in a :class:`SuiteFacts`
(:func:`benchc.suite.reports.suite_facts` fills it; ``benchc report`` and the plugin pass it).
A report built with the empty one goes without them: no notes, no offline verdicts, no record
command. The cells' grouping by family is plain spec (:func:`benchc.spec.family_cells`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


def _no_notes(run: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class SuiteFacts:
    #: ``notes(stored_run) -> [line]``: the run notes its folder still shows.
    notes: Callable[[Any], list[str]] = _no_notes
    #: ``verdicts(run_dir, thresholds_dir, *, vsi_dir, baseline_folder) -> [verdict dict]``:
    #: the gates re-checked on a stored run; None: this benchc offers none.
    verdicts: Callable[..., Iterable[dict]] | None = None
    #: ``record_command(run, thresholds_dir, *, baseline_folder, vsi_dataset, release) -> str``:
    #: the command that re-records the run's baseline; None: none is offered.
    record_command: Callable[..., str] | None = None


#: The empty one: a report without the suite's notes, offline verdicts and record commands.
NO_FACTS = SuiteFacts()
