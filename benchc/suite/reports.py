"""What a finished suite run writes besides the terminal summary: ``--report DIR`` and the CI
step summary. Plain data in (config, run folders, verdict records), so that the plugin's
session-end hook stays a few lines and this can be called without pytest.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from benchc.suite.config import SuiteConfig

if TYPE_CHECKING:
    from benchc.report.overall import Overall


def write_reports(
    cfg: SuiteConfig,
    run_dirs: Iterable[str],
    verdicts: list[dict] | None,
    *,
    sides: dict[str, str] | None = None,
    notes: list[str] | None = None,
    baseline_folder: Path | None = None,
    run_notes: list[str] | None = None,
    overall: Overall | None = None,
) -> None:
    """``--report DIR``: the HTML page and JSON of this run with its gate verdicts and
    ``run_notes`` (the notes the terminal prints); the Markdown verdict table into
    ``$GITHUB_STEP_SUMMARY`` when CI sets it; then ``--log-samples`` and the exporters
    (:mod:`benchc.export.session`)."""
    from benchc.provenance import session
    from benchc.report import ci

    dirs = [Path(d) for d in sorted(run_dirs)]
    this = session(cfg.command_line)  # once: the page, report.json and the exporters say the same
    page = None
    if cfg.report is not None and dirs:
        page = write_page(
            cfg, dirs, verdicts, cfg.report, baseline_folder=baseline_folder, overall=overall,
            session=this, notes=run_notes,
        )  # fmt: skip
    if verdicts:
        ci.write_step_summary(
            verdicts,
            report=str(page) if page else None,
            sides=sides,
            notes=notes or (),
            overall=overall,
        )
    from benchc.export.session import after_run

    after_run(
        cfg,
        dirs,
        verdicts,
        partial(
            write_page,
            baseline_folder=baseline_folder,
            overall=overall,
            session=this,
            notes=run_notes,
        ),
    )


def write_page(
    cfg: SuiteConfig,
    dirs: list[Path],
    verdicts: list[dict] | None,
    out: Path,
    *,
    baseline_folder: Path | None = None,
    notes: list[str] | None = None,
    overall: Overall | None = None,
    session: dict | None = None,
) -> Path:
    """The report of ``dirs`` in ``out``: one run (with its VSI run) against its baseline, or
    several runs compared; ``notes``: the session's run notes (None: what the runs show)."""
    from benchc.report import compare_runs, write_report
    from benchc.results.reader import group_runs

    groups = group_runs(dirs)  # the grid run and, with its own dataset, the VSI run
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
            notes=notes,
            overall=overall,
            session=session,
        )
    return compare_runs([g for g, _ in groups], out, vsi_dirs=[v for _, v in groups])


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
