"""Where a run writes, checked once pytest has collected (before anything loads or computes), and
what a write that fails after computing costs.

An unusable ``--report`` (a file in the way, a read-only folder) used to surface as a traceback
after the whole run was computed. :func:`output_problem` finds it up front: one usage error
naming the option, the path and why. A report folder holding a report file benchc did not
write is refused the same way (:func:`foreign_report_file`). A device that refuses a write while
the run computes ends it with one line (:func:`stop_when_refused`). A write that still fails
after computing (a report that cannot be built, an exporter) is :func:`after_compute`'s one
line naming the folder; the results stay in the store, the terminal summary still prints the
verdict and the gates' exit code stands.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator
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
    if cfg.report is not None:
        theirs = foreign_report_file(Path(cfg.report), log_samples=cfg.log_samples)
        if theirs is not None:
            return f"--report {cfg.report}: {theirs}; name a new folder or one benchc wrote"
    return None


def _report_schemas(log_samples: bool) -> dict[str, str]:
    """The files a report folder gets (and the per-sample log), each with the start of the
    schema it names when benchc wrote it."""
    from benchc.export.bundle import REPORT_FILES
    from benchc.report.data import SCHEMA
    from benchc.results import sample_log

    families = {".html": SCHEMA, ".json": SCHEMA, ".jsonl": sample_log.SCHEMA}
    return {
        name: families[Path(name).suffix].partition("/")[0] + "/"
        for name in REPORT_FILES
        if log_samples or name != sample_log.SAMPLE_LOG
    }


def _schema(path: Path) -> str:
    """The schema a report file names: ``schema`` of a JSON file or of a JSON-lines file's
    first line, the page's ``<meta name="generator">`` ('' when none)."""
    import json

    if path.suffix == ".html":
        with path.open("rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="replace")
        mark = '<meta name="generator" content="'
        return head.partition(mark)[2].partition('"')[0] if mark in head else ""
    with path.open("rb") as fh:
        text = fh.read() if path.suffix == ".json" else fh.readline()
    try:
        data = json.loads(text)
    except ValueError:
        return ""
    return str(data.get("schema", "")) if isinstance(data, dict) else ""


def foreign_report_file(folder: Path, *, log_samples: bool = False) -> str | None:
    """Which report file in ``folder`` benchc would overwrite though it did not write it (it
    names no schema of benchc's); None when there is none."""
    for name, family in _report_schemas(log_samples).items():
        path = Path(folder) / name
        if not path.is_file():
            continue
        try:
            schema = _schema(path)
        except OSError as exc:
            return f"{path} cannot be read ({exc.strerror})"
        if not schema.startswith(family):
            return f"{path} exists and benchc did not write it (it would be overwritten)"
    return None


#: ``errno`` of a write refused by the device: full, over quota, over the file-size limit,
#: mounted read-only.
DEVICE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def device_problem(cfg: SuiteConfig, exc: OSError, *, update: bool = False) -> str | None:
    """One line for a write the device refused while computing (None: another error), naming
    the option whose folder it was (or, when the error names no file, those it may be)."""
    if exc.errno not in DEVICE_ERRNOS:
        return None
    why = exc.strerror or str(exc)
    folders = outputs(cfg, update=update)
    if exc.filename:
        path = Path(os.fsdecode(exc.filename)).absolute()
        hit = [(f, p) for f, p in folders if path.is_relative_to(Path(p).absolute())]
        where = f"{hit[0][0]} {hit[0][1]}" if hit else str(path.parent)
        what = str(path)
    else:
        where = " or ".join(f"{f} {p}" for f, p in folders[:2])
        what = "the results"
    return (
        f"cannot write {what} ({why}): free space in {where} or name another folder, then "
        "rerun; what was stored so far is kept and reused"
    )


@contextlib.contextmanager
def stop_when_refused(cfg: SuiteConfig) -> Iterator[None]:
    """Inside a case: a write the device refuses ends the session with :func:`device_problem`'s
    one line (every later case would fail the same way, each with a traceback), with the
    verdict table's infrastructure exit status: a full disk is no regression."""
    import pytest

    from benchc.gates.states import EXIT_INFRA

    try:
        yield
    except OSError as exc:
        line = device_problem(cfg, exc)
        if line is None:
            raise
        pytest.exit(f"benchc: {line}", returncode=EXIT_INFRA)


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


__all__ = [
    "DEVICE_ERRNOS",
    "after_compute",
    "device_problem",
    "folder_problem",
    "foreign_report_file",
    "output_problem",
    "outputs",
    "stop_when_refused",
]
