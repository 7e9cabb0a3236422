"""The ``benchc`` command: ``benchc select ...`` (testbed selection) and ``benchc report ...``.

The robustness suite itself runs under pytest (``pytest --model=...``); this command covers
what happens around it: building a testbed and re-reading a stored run.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def _report(argv: Sequence[str]) -> int:
    from benchc.report import write_report
    from benchc.results import StoreError

    parser = argparse.ArgumentParser(
        prog="benchc report",
        description="Write a text summary and severity plots of stored results folders.",
    )
    parser.add_argument(
        "runs",
        nargs="+",
        type=Path,
        help="results folders (<results-dir>/<model>/<dataset>-<hash>) or a --results-dir",
    )
    parser.add_argument("--out", type=Path, default=Path("report"), help="output folder")
    parser.add_argument(
        "--thresholds-dir", type=Path, default=None, help="also show cell gates vs snapshots"
    )
    args = parser.parse_args(list(argv))
    runs: list[Path] = []
    for path in args.runs:
        found = [p.parent for p in sorted(path.glob("**/manifest.json"))]
        if not found:
            parser.error(f"{path}: no benchc results folder (manifest.json) found")
        runs.extend(found)
    for run_dir in runs:
        try:
            target = write_report(run_dir, args.out, thresholds_dir=args.thresholds_dir)
        except (StoreError, OSError, ValueError) as exc:  # a damaged store: one clear line
            print(
                f"benchc report: {run_dir}: cannot read this results folder: {exc}\n"
                "  rerun the suite with the same --results-dir to recompute damaged entries",
                file=sys.stderr,
            )
            return 1
        print((target / "summary.txt").read_text(), end="")
        print(f"-> {target}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"select": "choose a corruption-responsive testbed", "report": "report a run"}
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in commands:
        lines = ["usage: benchc {select,report} ...", ""]
        lines += [f"  {name:<8} {text}" for name, text in commands.items()]
        lines += ["", "the suite itself: pytest --model=<hub id or folder> (see README)"]
        print(
            "\n".join(lines),
            file=sys.stderr if argv and argv[0] not in ("-h", "--help") else sys.stdout,
        )
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    command, rest = argv[0], argv[1:]
    if command == "select":
        from benchc.select.cli import main as select_main

        return int(select_main(rest) or 0)
    return _report(rest)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
