"""What ``--log-samples``, ``--wandb``, ``--mlflow`` and ``--push-to-hub`` do at the end of a
pytest session: one call from :func:`benchc.suite.reports.write_reports`.

An exporter needs the report; without ``--report`` one is written to a temporary folder and
exported from there. A failing exporter does not hide the others or the gates' verdict: each
failure is reported as one line and the others still run.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

#: ``write_page(cfg, run_dirs, verdicts, out_dir)``: the report writer of the session.
WritePage = Callable[[Any, Sequence[Path], Any, Path], Any]


#: The exporters with a flag of their own (``--wandb``, ``--mlflow``, ``--push-to-hub``): the
#: config field holding the target is the exporter's name. Any exporter, these included, is
#: also ``--export=<name>=<target>``.
FLAGS = ("wandb", "mlflow", "push_to_hub")


def wanted(cfg: Any) -> list[tuple[str, str]]:
    """The exporters ``cfg`` asks for: (name in ``benchc.exporters``, target)."""
    named = [(name, getattr(cfg, name)) for name in FLAGS if getattr(cfg, name, None)]
    return named + [tuple(pair) for pair in getattr(cfg, "export", None) or ()]


def after_run(
    cfg: Any, run_dirs: Sequence[Path], verdicts: Any, write_page: WritePage
) -> list[str]:
    """Write the per-sample log and run the exporters ``cfg`` asks for; returns one line per
    thing done or failed (the plugin may print them)."""
    from benchc.results.reader import group_runs

    exporters = wanted(cfg)
    if not run_dirs or not (exporters or getattr(cfg, "log_samples", False)):
        return []
    lines: list[str] = []
    groups = group_runs([Path(d) for d in run_dirs])
    with tempfile.TemporaryDirectory(prefix="benchc-export-") as tmp:
        report_dir = Path(cfg.report) if cfg.report is not None else Path(tmp) / "report"
        if cfg.report is None and exporters:
            write_page(cfg, [Path(d) for d in run_dirs], verdicts, report_dir)
        if cfg.log_samples:
            from benchc.results.sample_log import write_sample_log

            log_dir = report_dir if (cfg.report is not None or exporters) else groups[0][0]
            lines.append(f"per-sample log: {write_sample_log(groups, log_dir)}")
        if exporters:
            lines += run_exporters(cfg, report_dir)
    for line in lines:
        print(f"benchc: {line}", file=sys.__stderr__ or sys.stderr, flush=True)
    return lines


def run_exporters(cfg: Any, report_dir: Path) -> list[str]:
    """Each exporter ``cfg`` asks for, on the report in ``report_dir``: the entry point of
    ``benchc.exporters`` of that name, ``export(bundle, target, *, local_dir)``."""
    from benchc.export.bundle import build
    from benchc.registry import EXPORTERS

    bundle = build(report_dir, thresholds_dir=cfg.thresholds_dir)
    # an exporter's local files (W&B's run folder): beside --report, else in the results store
    # (never the working directory, nor a temporary report folder that is removed)
    local = Path(cfg.report) if cfg.report is not None else Path(cfg.results_dir)
    lines = []
    for name, target in wanted(cfg):
        try:
            where = EXPORTERS.load(name)(bundle, target, local_dir=local)
            lines.append(f"exported to {name} {target}: {where}")
        except Exception as exc:  # one exporter's failure must not hide the rest
            lines.append(f"export to {name} {target} failed: {type(exc).__name__}: {exc}")
    return lines
