"""What a finished suite run writes besides the terminal summary: ``--report DIR`` and the CI
step summary. Plain data in (config, run folders, verdict records), so that the plugin's
session-end hook stays a few lines and this can be called without pytest. Every write here comes
after the results were computed: one that fails is one line naming its folder
(:func:`benchc.suite.outputs.after_compute`), the others still run, and the report's line says
how to rebuild it from the stored results.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchc.suite.config import SuiteConfig

if TYPE_CHECKING:
    from benchc.gates.verdict import Overall
    from benchc.results.facts import SuiteFacts


def write_reports(
    cfg: SuiteConfig,
    run_dirs: Iterable[str],
    verdicts: list[dict] | None,
    *,
    sides: dict[str, str] | None = None,
    notes: list[str] | None = None,
    baseline_folder: Path | None = None,
    overall: Overall | None = None,
    run_notes: list[str] | None = None,
    changes: dict[str, Any] | None = None,
) -> list[str]:
    """``--report DIR``: the HTML page and JSON of this run with its gate verdicts and
    ``run_notes`` (the notes the terminal prints); the
    Markdown verdict table into ``$GITHUB_STEP_SUMMARY`` when CI sets it; then
    ``--log-samples`` and the exporters (:mod:`benchc.export.session`). ``overall``: the run's
    verdict, decided once (:mod:`benchc.suite.overall`). Returns one line per write that
    failed."""
    import os

    from benchc.export.session import after_run
    from benchc.provenance import session
    from benchc.report import ci
    from benchc.suite.outputs import after_compute

    dirs = [Path(d) for d in sorted(run_dirs)]
    this = session(cfg.command_line)  # once: the page, report.json and the exporters say the same
    writer = partial(write_page, baseline_folder=baseline_folder, overall=overall, session=this,
                     notes=run_notes, changes=changes)  # fmt: skip
    errors: list[str | None] = []
    page = None
    if cfg.report is not None and dirs:
        page, error = after_compute(
            "the report (--report)",
            cfg.report,
            lambda: writer(cfg, dirs, verdicts, cfg.report),
        )
        if error:
            errors.append(f"{error}; rebuild it from the kept results: "
                          f"{rebuild_command(cfg.report, dirs, baseline_folder)}")  # fmt: skip
    if verdicts:
        errors.append(after_compute(
            "the CI step summary", os.environ.get("GITHUB_STEP_SUMMARY"),
            lambda: ci.write_step_summary(verdicts, report=str(page) if page else None,
                                          sides=sides, notes=notes or (), overall=overall),
        )[1])  # fmt: skip
    errors.append(after_compute(
        "the per-sample log and exports", cfg.report,
        lambda: after_run(cfg, dirs, verdicts, writer),
    )[1])  # fmt: skip
    return [e for e in errors if e]


def rebuild_command(out: Path, dirs: list[Path], baseline_folder: Path | None) -> str:
    """The ``benchc report`` command that writes this run's report again from the store."""
    import shlex

    words = ["benchc", "report", *map(str, dirs), "--out", str(out)]
    if baseline_folder is not None:
        words += ["--baseline", str(baseline_folder)]
    return shlex.join(words)


def write_page(
    cfg: SuiteConfig,
    dirs: list[Path],
    verdicts: list[dict] | None,
    out: Path,
    *,
    baseline_folder: Path | None = None,
    overall: Overall | None = None,
    session: dict | None = None,
    notes: list[str] | None = None,
    changes: dict[str, Any] | None = None,
) -> Path:
    """The report of ``dirs`` in ``out``: one run (with its VSI run) against its baseline, or
    several runs compared; ``notes``: the session's run notes (None: what the runs show)."""
    from benchc.report import compare_runs, write_report
    from benchc.results.reader import group_runs, has_grid

    groups = group_runs(dirs)  # the grid run and, with its own dataset, the VSI run
    if overall is not None or verdicts:  # a gate run: its verdict's page, never a comparison
        groups = [g for g in groups if has_grid(g[0]) or g[1] is not None][:1]
        if not groups or (overall is not None and not has_grid(groups[0][0]) and not verdicts):
            return _verdict_only(cfg, out, overall, notes)
    if len(groups) == 1:
        return write_report(
            groups[0][0],
            out,
            vsi_dir=groups[0][1],
            thresholds_dir=cfg.thresholds_dir,
            baseline_folder=baseline_folder,
            verdicts=verdicts,
            verdict_note=None if verdicts else "no gate verdicts were recorded in this run",
            record_command=_record_command(cfg, baseline_folder),
            accept_command=_accept_command(cfg),
            vsi_support=cfg.vsi_support,
            overall=overall,
            session=session,
            notes=notes,
            facts=suite_facts(),
            changes=changes,
        )
    return compare_runs(
        [g for g, _ in groups], out, vsi_dirs=[v for _, v in groups], facts=suite_facts()
    )


def _verdict_only(cfg: SuiteConfig, out: Path, overall: Overall | None, notes) -> Path:
    """The page of a gate run that stored nothing to draw (:mod:`benchc.report.verdict_only`)."""
    from benchc.gates.engine import run_verdict
    from benchc.report.verdict_only import write_verdict_only

    title = f"benchc report: {cfg.model} (no stored grid to draw)"
    return write_verdict_only(out, overall or run_verdict([]), title=title, notes=notes or ())


def suite_facts() -> SuiteFacts:
    """What the report needs from the suite about a stored run (notes, offline verdicts, the
    re-record command), filled with the suite's own code; the report imports none of it."""
    from benchc.results.facts import SuiteFacts
    from benchc.suite.gate import run_record_command
    from benchc.suite.notes import stored_run_notes
    from benchc.suite.verdicts import collect

    return SuiteFacts(notes=stored_run_notes, verdicts=collect, record_command=run_record_command)


def write_report(*args: Any, **kwargs: Any) -> Path:
    """:func:`benchc.report.write_report` with the suite's facts (:func:`suite_facts`)."""
    from benchc.report import write_report as write

    return write(*args, **{"facts": suite_facts(), **kwargs})


def compare_runs(*args: Any, **kwargs: Any) -> Path:
    """:func:`benchc.report.compare_runs` with the suite's facts (:func:`suite_facts`)."""
    from benchc.report import compare_runs as compare

    return compare(*args, **{"facts": suite_facts(), **kwargs})


def record_command_for(*args: Any, **kwargs: Any) -> str | None:
    """:func:`benchc.report.write.record_command_for` with the suite's facts."""
    from benchc.report.write import record_command_for as command

    return command(*args, **{"facts": suite_facts(), **kwargs})


def _accept_command(cfg: SuiteConfig) -> str:
    """The command that records this candidate as its baseline (the change is intended): its
    own settings, results and ``--baseline``."""
    from benchc.suite.gate import record_command

    return record_command(cfg)


def _record_command(cfg: SuiteConfig, folder: Path | None) -> str:
    """The command the report offers to re-record the baseline: from the released checkpoint
    (the baseline's manifest names it) when the run gated a candidate against a named one."""
    from benchc.gates.baselines import BaselineRef, read_manifest
    from benchc.suite.gate import record_command
    from benchc.suite.messages import record_release

    if cfg.baseline is None or folder is None:
        return record_command(cfg)
    ref = BaselineRef(folder.name, folder, cfg.baseline)
    return record_release(cfg, ref, read_manifest(folder).get("model"))
