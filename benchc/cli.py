"""The ``benchc`` command: ``benchc select`` (testbed selection), ``benchc report`` and
``benchc compare`` (report pages of stored runs), ``benchc history`` (figures across
baselines), ``benchc push`` (a results store copied to a URL for ``--from-store``) and
``benchc plan`` (what a baseline's gates can resolve, and the samples a target needs).

The robustness suite itself runs under pytest (``pytest --model=...``); this command covers
what happens around it: building a testbed and re-reading a stored run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchc.gates.states import (
    EXIT_FAIL,
    EXIT_INCONCLUSIVE,
    EXIT_INFRA,
    EXIT_OK,
    EXIT_USAGE,
    Policy,
)
from benchc.results.store import StoreError

if TYPE_CHECKING:
    from benchc.gates.verdict import Overall


class Parser(argparse.ArgumentParser):
    """argparse with the verdict table's usage code (:data:`benchc.gates.states.EXIT_USAGE`)
    instead of argparse's 2, which the table gives an interrupted run."""

    def error(self, message: str):  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _runs_under(
    parser: argparse.ArgumentParser, paths: Sequence[Path]
) -> list[tuple[Path, Path | None]]:
    """``(run folder, VSI run folder or None)`` under ``paths``: a model's grid run and its
    separate VSI run are one report."""
    from benchc.results.reader import find_runs, group_runs

    runs: list[Path] = []
    for path in paths:
        found = find_runs(path)
        if not found:
            parser.error(f"{path}: no benchc results folder (manifest.json) found")
        runs.extend(p for p in found if p not in runs)
    return group_runs(runs)


def _check_out(parser: argparse.ArgumentParser, out: Path) -> None:
    """``--out`` must be a folder this process can write (a usage error before any work)."""
    from benchc.suite.outputs import folder_problem, foreign_report_file

    why = folder_problem(out) or foreign_report_file(out)
    if why is not None:
        parser.error(f"--out {out}: cannot write there: {why}")


def _report(argv: Sequence[str]) -> int:
    from benchc.results.reader import read_run
    from benchc.suite.reports import write_report  # the report with the suite's facts

    parser = Parser(
        prog="benchc report",
        description="Write report.html (self-contained) and report.json of stored runs.",
    )
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        help="results folders (<results-dir>/<model>/<dataset>-<hash>) or a --results-dir",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("report"), help="output folder (default ./report)"
    )
    parser.add_argument(
        "--baseline",
        "--thresholds-dir",
        dest="baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="the baseline to overlay and check the gates against: a baseline folder "
        "(thresholds/release-1) or a thresholds folder holding one named after the run's model",
    )
    parser.add_argument("--no-images", action="store_true", help="skip the drill-down thumbnails")
    parser.add_argument(
        "--strict-gates",
        action="store_true",
        help="as the suite's option: an unchecked gate makes the verdict inconclusive, and an "
        f"unresolved or inconclusive verdict exits {EXIT_INCONCLUSIVE} (unless "
        "--inconclusive=warn)",
    )
    parser.add_argument(
        "--inconclusive",
        choices=("warn", "fail"),
        default=None,
        help="an unresolved or inconclusive verdict (no gate failed, but a change beyond a "
        "gate's minimal detectable regression was not resolved, or the gates could not have "
        f"caught a regression): warn (default) or fail (exit status {EXIT_INCONCLUSIVE}; the "
        "default under --strict-gates)",
    )
    args = parser.parse_args(list(argv))
    _check_out(parser, args.out)
    runs = _runs_under(parser, args.runs)
    policy = Policy(args.strict_gates, args.inconclusive)
    codes = [EXIT_OK]
    for run_dir, vsi_dir in runs:
        out = args.out if len(runs) == 1 else args.out / f"{run_dir.parent.name}-{run_dir.name}"
        folder = None
        try:
            read_run(run_dir, vsi_dir=vsi_dir)
            if args.baseline is not None:
                folder = _baseline_folder(parser, run_dir, args.baseline)
        except (StoreError, OSError, ValueError) as exc:
            return _unreadable("report", run_dir, exc)
        try:
            page = write_report(
                run_dir,
                out,
                thresholds_dir=args.baseline,
                baseline_folder=folder,
                images=not args.no_images,
                vsi_dir=vsi_dir,
                policy=policy,
            )
        except StoreError as exc:  # an array file the first read did not touch
            return _unreadable("report", run_dir, exc)
        except Exception as exc:  # the run is readable: building or writing the page failed
            return _not_built("report", run_dir, out, exc)
        statuses, overall = _statuses(page.parent / "report.json")
        print(f"{run_dir} -> {page}")
        if folder is not None:
            print(f"  gates against baseline {folder.name} ({folder}): " + _counts(statuses))
        if overall is not None:
            print("\n".join(f"  {line}" for line in overall.lines()))
            codes.append(overall.exit_code)
    return EXIT_FAIL if EXIT_FAIL in codes else max(codes)


#: ``benchc report``, ``compare``, ``history``, ``push`` and ``plan`` exit codes: the verdict
#: table's (:mod:`benchc.gates.states`), each with what it means for these commands (the docs
#: site's exit-code reference is generated from this table and the verdict table).
EXIT_CODES: dict[int, str] = {
    EXIT_OK: "done: no gate failed (PASS; UNRESOLVED or INCONCLUSIVE under --inconclusive=warn)",
    EXIT_FAIL: "a gate failed (`benchc report --baseline`): the only code of a regression",
    EXIT_USAGE: "usage error: bad arguments, no such baseline (the message lists those that "
    "exist), runs that share no cell (`compare`), a target that names no gate (`plan`)",
    EXIT_INCONCLUSIVE: "no gate failed but the verdict is UNRESOLVED or INCONCLUSIVE, under "
    "`--inconclusive=fail` or `--strict-gates` (the reasons are printed, and in report.json "
    "`overall`)",
    EXIT_INFRA: "a stored run cannot be read (a damaged or foreign results folder: the message "
    "names the file), or the page could not be built or written (one line naming the output "
    "folder and why); nothing stored was changed",
}
EXIT_UNREADABLE = EXIT_NOT_BUILT = EXIT_INFRA
EXIT_GATE_FAILED = EXIT_FAIL


def _baseline_folder(parser: argparse.ArgumentParser, run_dir: Path, given: Path) -> Path:
    """The baseline ``--baseline`` names for this run, or a usage error saying where benchc
    looked and which baselines exist there."""
    from benchc.gates.baselines import available
    from benchc.report.write import baseline_folder_for
    from benchc.results.reader import read_run

    folder = baseline_folder_for(read_run(run_dir), given)
    if folder.is_dir():
        return folder
    there = available(given)
    parser.error(
        f"--baseline {given}: no baseline there for this run: {folder} does not exist. Give a "
        "baseline folder itself"
        + (f", e.g. --baseline {given / there[0]} (baselines in {given}: {', '.join(there)})"
           if there else f" ({given} holds no baselines)")
    )  # fmt: skip


def _statuses(report_json: Path) -> tuple[list[str], Overall | None]:
    """The gate statuses and the run's verdict a written ``report.json`` holds."""
    import json

    from benchc.gates.verdict import Overall

    doc = json.loads(report_json.read_text(encoding="utf-8"))
    statuses = [str(v.get("status")) for v in (doc.get("verdicts") or {}).get("items", [])]
    return statuses, Overall.from_dict(doc["overall"]) if doc.get("overall") else None


def _counts(statuses: list[str]) -> str:
    from collections import Counter

    return ", ".join(f"{n} {s}" for s, n in sorted(Counter(statuses).items())) or "none"


def _not_built(command: str, where: object, out: Path, exc: Exception) -> int:
    """Readable runs whose page could not be built or written: one line, the infrastructure
    exit status."""
    reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    print(
        f"benchc {command}: {where}: could not build or write the page in {out} ({reason}); "
        "the stored results are intact",
        file=sys.stderr,
    )
    return EXIT_NOT_BUILT


def _unreadable(command: str, where: object, exc: Exception) -> int:
    """A damaged or foreign results folder: one clear line, the infrastructure exit status."""
    print(
        f"benchc {command}: {where}: cannot read this results folder: {exc}\n"
        "  rerun the suite with the same --results-dir to recompute damaged entries",
        file=sys.stderr,
    )
    return EXIT_UNREADABLE


def _compare(argv: Sequence[str]) -> int:
    from benchc.report import CompareError
    from benchc.suite.reports import compare_runs  # the report with the suite's facts

    parser = Parser(
        prog="benchc compare",
        description="One report page with two or more stored runs side by side "
        "(two checkpoints, or one checkpoint on two datasets).",
    )
    parser.add_argument("runs", nargs="+", type=Path, help="results folders (two or more runs)")
    parser.add_argument(
        "--out", type=Path, default=Path("compare"), help="output folder (default ./compare)"
    )
    parser.add_argument(
        "--labels", default=None, help="comma-separated names of the runs, in order"
    )
    parser.add_argument("--no-images", action="store_true", help="skip the drill-down thumbnails")
    args = parser.parse_args(list(argv))
    runs = _runs_under(parser, args.runs)
    if len(runs) < 2:
        parser.error(f"compare needs two or more runs, found {len(runs)} under {args.runs}")
    _check_out(parser, args.out)
    labels = args.labels.split(",") if args.labels else None
    if labels is not None and len(labels) != len(runs):
        parser.error(f"--labels names {len(labels)} runs, {len(runs)} were found")
    try:
        page = compare_runs(
            [r for r, _ in runs],
            args.out,
            labels=labels,
            images=not args.no_images,
            vsi_dirs=[v for _, v in runs],
        )
    except CompareError as exc:  # the runs are readable; what was asked of them is not
        print(f"benchc compare: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (StoreError, FileNotFoundError) as exc:  # reading a run (it names the folder)
        return _unreadable("compare", ", ".join(str(r) for r, _ in runs), exc)
    except Exception as exc:  # the runs are readable: building or writing the page failed
        return _not_built("compare", ", ".join(str(r) for r, _ in runs), args.out, exc)
    print(f"{len(runs)} runs -> {page}")
    import json

    doc = json.loads((page.parent / "report.json").read_text(encoding="utf-8"))
    for pair in (doc.get("compare") or {}).get("paired", {}).get("pairs", []):
        print(f"  {pair['summary']}")
    return EXIT_OK


def _history(argv: Sequence[str]) -> int:
    from benchc.report.history import HistoryError, history, html_page, text_table
    from benchc.results.store import atomic_write_text

    parser = Parser(
        prog="benchc history",
        description="Each gated model-level and VSI figure across the baselines recorded in a "
        "thresholds folder, release after release, with the drift of the newest against the "
        "oldest: a slow drift shows before any single gate fails.",
    )
    parser.add_argument("thresholds", type=Path, metavar="THRESHOLDS_DIR")
    parser.add_argument(
        "--baselines",
        default=None,
        help="comma-separated baseline names in release order (default: the order git added "
        "them, else by name)",
    )
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write JSON")
    parser.add_argument("--html", type=Path, default=None, metavar="PATH", help="also write HTML")
    args = parser.parse_args(list(argv))
    names = [n for n in args.baselines.split(",") if n] if args.baselines else None
    try:
        doc = history(args.thresholds, names)
    except HistoryError as exc:
        print(f"benchc history: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(text_table(doc))
    import json

    for path, text in (
        (args.json, lambda: json.dumps(doc, indent=1, sort_keys=True) + "\n"),
        (args.html, lambda: html_page(doc)),
    ):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text())
            print(f"wrote {path}")
    return EXIT_OK


def _push(argv: Sequence[str]) -> int:
    from benchc.engine.stored import push

    parser = Parser(
        prog="benchc push",
        description="Copy a results store to an fsspec URL (s3://, gs://, file://, ...) so a "
        "CPU-only job gates on it with pytest --from-store=URL: entries first, manifests last; "
        "entries already there are kept.",
    )
    parser.add_argument("store", type=Path, metavar="RESULTS_DIR", help="a --results-dir")
    parser.add_argument("url", metavar="URL")
    args = parser.parse_args(list(argv))
    if not args.store.is_dir():
        parser.error(f"{args.store}: no such folder")
    try:
        copied, kept = push(args.store, args.url)
    except StoreError as exc:
        print(f"benchc push: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"pushed {args.store} to {args.url}: {copied} file(s) copied, {kept} already there")
    return EXIT_OK


def _plan(argv: Sequence[str]) -> int:
    from benchc.gates.plan import Grid, PlanError, parse_targets, plan, schedule, text_table
    from benchc.suite.options import OPTIONS, ConfigError

    parser = Parser(
        prog="benchc plan",
        description="Before relying on a baseline: from its recorded per-sample values, each "
        "gate's minimal detectable regression exactly as a gate run with the same grid "
        "options prints it, and the samples a target regression needs (--target). Reads the "
        "baseline; writes nothing but --json.",
    )
    parser.add_argument("baseline", type=Path, metavar="BASELINE_DIR", help="a baseline folder")
    parser.add_argument(
        "--target",
        action="append",
        default=[],
        metavar="[LEVEL:]FIGURE=VALUE",
        help="a regression to resolve, e.g. accuracy=0.02 or model:p_correct=0.01 (repeatable)",
    )
    grid_options = [o for o in OPTIONS if o.plan]  # the suite's own, as a gate run takes them
    for opt in grid_options:
        opt.add_to(parser.add_argument, opt.flag)
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write JSON")
    args = parser.parse_args(list(argv))
    if not args.baseline.is_dir():
        parser.error(f"{args.baseline}: no such folder")
    try:
        given = {o.field: o.given(lambda dest: getattr(args, dest)) for o in grid_options}
        grid = Grid(given["corruptions"], given["severities"], given["limit"], given["looks"])
        rows = plan(args.baseline, targets=parse_targets(args.target),
                    alpha=given["false_alarm_budget"], grid=grid)  # fmt: skip
    except (PlanError, ConfigError, ValueError) as exc:
        print(f"benchc plan: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"baseline {args.baseline}: minimal detectable regression of each gate (one-directional)")
    print(f"for a gate run on {grid.describe(rows)}")
    print(text_table(rows))
    from benchc.gates.baselines import locate

    total = locate(args.baseline).recorded_n()
    for line in schedule(rows, grid, given["false_alarm_budget"], total):
        print(line)
    if args.json is not None:
        import json

        from benchc.results.store import atomic_write_text

        doc = [r.to_dict() for r in rows]
        atomic_write_text(args.json, json.dumps(doc, indent=1, sort_keys=True) + "\n")
        print(f"wrote {args.json}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {
        "select": "choose a corruption-responsive testbed",
        "report": "report.html + report.json of a stored run",
        "compare": "one report page with stored runs side by side",
        "history": "each gated figure across the recorded baselines (slow drift)",
        "push": "copy a results store to a URL (gate on it elsewhere: --from-store)",
        "plan": "what a baseline's gates resolve, and the samples a target needs",
    }
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        lines = ["usage: benchc {select,report,compare,history,push,plan} ...", ""]
        lines += [f"  {name:<8} {text}" for name, text in commands.items()]
        lines += ["", "the suite itself: pytest --model=<hub id or folder> (docs/guides/)"]
        print(
            "\n".join(lines),
            file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout,
        )
        return EXIT_OK if argv and argv[0] in ("-h", "--help") else EXIT_USAGE
    command, rest = argv[0], argv[1:]
    if command == "select":
        from benchc.select.cli import main as select_main

        return int(select_main(rest) or 0)
    if command == "compare":
        return _compare(rest)
    if command == "history":
        return _history(rest)
    if command == "push":
        return _push(rest)
    if command == "plan":
        return _plan(rest)
    return _report(rest)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
