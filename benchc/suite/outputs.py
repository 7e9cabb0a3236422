"""Where a run writes, checked when pytest configures (before the first forward pass), and
what a write that fails after computing costs.

An unusable ``--report`` (a file in the way, a read-only folder) used to surface as a traceback
after the whole run was computed. :func:`output_problem` finds it up front: one usage error
naming the option, the path and why. A write that still fails later (a full disk, a report
that cannot be built, an exporter) is :func:`after_compute`'s one line naming the folder; the
results stay in the store, the terminal summary still prints the verdict and the gates' exit
code stands.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from benchc.suite.config import SuiteConfig

T = TypeVar("T")


def folder_problem(path: Path) -> str | None:
    """Why a run could not create or write into the folder ``path`` (None: it can). Nothing is
    created: the first existing ancestor must be a folder this process can write into."""
    p = Path(path)
    try:
        for here in (p, *p.parents):
            if not here.exists() and not here.is_symlink():
                continue
            if not here.is_dir():
                what = "is a file in the way" if here == p else "is a file, not a folder"
                return f"{here} {what}"
            if not os.access(here, os.W_OK | os.X_OK):
                tail = "" if here == p else f", so {p} cannot be created"
                return f"{here} is read-only{tail}"
            return None
    except OSError as exc:
        return f"{exc.strerror or exc}"
    return None


def outputs(cfg: SuiteConfig, *, update: bool) -> list[tuple[str, Path]]:
    """Every folder this run may write into, with the option that names it."""
    from benchc.corruptions.cache import default_cache_root

    out = [("--results-dir", Path(cfg.results_dir))]
    out.append(("--cache-dir", Path(cfg.cache_dir) if cfg.cache_dir else default_cache_root()))
    if cfg.report is not None:
        out.append(("--report", Path(cfg.report)))
    if update:  # a recording writes the baseline
        if cfg.baseline is not None and Path(cfg.baseline).is_absolute():
            out.append(("--baseline", Path(cfg.baseline)))
        else:
            out.append(("--thresholds-dir", Path(cfg.thresholds_dir)))
    return out


def output_problem(cfg: SuiteConfig, *, update: bool) -> str | None:
    """One line for the first output folder this run cannot write into (None: all can)."""
    for flag, path in outputs(cfg, update=update):
        why = folder_problem(path)
        if why is not None:
            return f"{flag} {path}: cannot write there: {why}; name a folder this run can write"
    return None


def after_compute(
    what: str, folder: Path | str | None, action: Callable[[], T]
) -> tuple[T | None, str | None]:
    """Run ``action`` (a write after the results were computed): its value, or None and one
    line naming ``folder`` when it raised. Nothing computed is lost by it."""
    try:
        return action(), None
    except Exception as exc:  # a write after computing must never cost the verdict
        where = f" in {folder}" if folder is not None else ""
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
        return None, f"could not write {what}{where} ({reason})"


__all__ = ["after_compute", "folder_problem", "output_problem", "outputs"]
