"""``benchc history THRESHOLDS_DIR``: every gated model-level and VSI figure across the recorded
baselines, release after release, so a slow drift shows before any single gate fails.

Each gate compares a candidate with one baseline; a figure that loses a little less than its
floor at every release never fails a gate, yet after five releases it has lost several floors.
This reads what each baseline folder recorded (its threshold snapshots: value and SE, the
rules' floors, the dataset fingerprint) and lays the releases side by side, with the drift of
the newest against the oldest comparable one in the figure's unit and in floors.

Order: ``baselines`` as given, else the order git first added each folder (when the thresholds
folder is in a git work tree), else by name with numbers compared as numbers.
"""

from __future__ import annotations

import math
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchc.fsutil import display_path
from benchc.gates.baselines import available, read_manifest
from benchc.metrics.figures import definition
from benchc.report import baseline as snap

#: The levels whose figures a history shows (one snapshot per figure each).
LEVELS = ("model", "vsi")


class HistoryError(ValueError):
    """A thresholds folder without baselines, or a named baseline that is not there."""


@dataclass(frozen=True)
class Point:
    value: float | None
    se: float | None
    dataset: str | None


def _natural(name: str) -> list[Any]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def _git_added(folder: Path) -> float | None:
    """When git first committed anything in ``folder`` (epoch seconds), or None."""
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "log", "--diff-filter=A", "--format=%ct", "--", "."],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return float(out[-1]) if out else None


def ordered(thresholds_dir: Path, names: Sequence[str] | None = None) -> list[str]:
    """The baselines of ``thresholds_dir`` in release order (module docstring)."""
    if not Path(thresholds_dir).is_dir():
        what = "is a file, not a folder" if Path(thresholds_dir).exists() else "does not exist"
        raise HistoryError(f"{display_path(thresholds_dir)}: {what}")
    there = available(thresholds_dir)
    if not there:
        raise HistoryError(f"{display_path(thresholds_dir)}: no recorded baseline in it")
    if names:
        missing = [n for n in names if n not in there]
        if missing:
            raise HistoryError(
                f"--baselines: {', '.join(missing)} not in {display_path(thresholds_dir)} "
                f"(recorded there: {', '.join(there)})"
            )
        return list(names)
    added = {n: _git_added(Path(thresholds_dir) / n) for n in there}
    if all(t is not None for t in added.values()):
        return sorted(there, key=lambda n: (added[n], _natural(n)))
    return sorted(there, key=_natural)


def _points(folder: Path) -> dict[str, tuple[Point, float | None]]:
    """``{"model:ras": (point, floor)}`` for every model-level and VSI figure a folder records."""
    base = snap.read_folder(folder)
    out: dict[str, tuple[Point, float | None]] = {}
    if base is None:
        return out
    for level, payloads in (("model", base.model), ("vsi", base.vsi)):
        for name, payload in payloads.items():
            fig = payload.figures[name]
            floor = next((r.floor for r in payload.rules if r.figure == name), None)
            value = None if not math.isfinite(fig.value) else float(fig.value)
            se = float(fig.se) if fig.se is not None and math.isfinite(fig.se) else None
            fp = payload.info.get("dataset_fingerprint")
            out[f"{level}:{name}"] = (Point(value, se, str(fp) if fp else None), floor)
    return out


def history(thresholds_dir: Path, names: Sequence[str] | None = None) -> dict[str, Any]:
    """The history document (``--json``): ``baselines`` (name, model, dataset fingerprint, in
    release order), and per figure ``rows`` with each baseline's value and SE, the floor, and
    the ``drift`` of the newest against the oldest baseline recorded on the same dataset (its
    change, in floors, and whether it went the worse way by at least one floor)."""
    thresholds_dir = Path(thresholds_dir)
    order = ordered(thresholds_dir, names)
    per = {n: _points(thresholds_dir / n) for n in order}
    baselines = []
    for n in order:
        meta = read_manifest(thresholds_dir / n)
        fps = {p.dataset for p, _ in per[n].values() if p.dataset}
        baselines.append({"name": n, "model": meta.get("model"),
                          "dataset_fingerprint": ", ".join(sorted(fps)) or None})  # fmt: skip
    keys = sorted({k for pts in per.values() for k in pts}, key=lambda k: (LEVELS.index(
        k.partition(":")[0]), k))  # fmt: skip
    rows = []
    for key in keys:
        level, _, name = key.partition(":")
        fig = definition(name)
        points = [per[n].get(key, (None, None))[0] for n in order]
        floor = next((per[n][key][1] for n in reversed(order) if key in per[n]), None)
        rows.append({
            "level": level, "figure": name, "label": fig.label, "direction": fig.direction,
            "floor": floor, "unit": "%" if fig.bounds == (0.0, 100.0) else None,
            "values": [None if p is None else {"value": p.value, "se": p.se} for p in points],
            "drift": _drift(points, fig.direction, floor, order),
        })  # fmt: skip
    return {"schema": "benchc-history/1", "thresholds_dir": display_path(thresholds_dir),
            "baselines": baselines, "rows": rows}  # fmt: skip


def _drift(
    points: Sequence[Point | None], direction: str, floor: float | None, order: Sequence[str]
) -> dict[str, Any] | None:
    """Newest minus the oldest baseline with a value on the newest's dataset."""
    last = next((i for i in range(len(points) - 1, -1, -1)
                 if points[i] is not None and points[i].value is not None), None)  # fmt: skip
    if last is None:
        return None
    newest = points[last]
    assert newest is not None and newest.value is not None
    first = next((i for i, p in enumerate(points[:last]) if p is not None and p.value is not None
                  and p.dataset == newest.dataset), None)  # fmt: skip
    if first is None:
        return None
    old = points[first]
    assert old is not None and old.value is not None
    change = newest.value - old.value
    worse = -change if direction == "higher" else change
    floors = worse / floor if floor else None
    return {
        "from": order[first], "to": order[last], "change": change,
        "floors_worse": floors, "flag": bool(floors is not None and floors >= 1.0),
    }  # fmt: skip


def _cell(v: dict[str, Any] | None) -> str:
    """A recorded value and its standard error, written as such: not ``value ± SE``, which
    reads as an interval and crosses the bound of a figure at its edge (a rate at 0)."""
    if v is None or v.get("value") is None:
        return "—"
    return f"{v['value']:.4f}" + (f" (SE {v['se']:.4f})" if v.get("se") is not None else "")


def text_table(doc: dict[str, Any]) -> str:
    """The history as a fixed-width text table (the terminal)."""
    names = [b["name"] for b in doc["baselines"]]
    head = ["figure", *names, "drift (newest - oldest)"]
    lines = []
    for r in doc["rows"]:
        d = r["drift"]
        drift = "n/a"
        if d is not None:
            drift = f"{d['change']:+.4f}"
            if d["floors_worse"] is not None:
                drift += f" ({d['floors_worse']:+.2f} floors worse)"
            if d["flag"]:
                drift += " DRIFT"
        unit = f" ({r['unit']})" if r.get("unit") else ""
        lines.append([f"{r['level']}:{r['figure']}{unit}", *(_cell(v) for v in r["values"]), drift])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    out = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
    out += [fmt.format(*row) for row in lines]
    out.append("SE: the standard error each baseline recorded for the figure, in its unit")
    flagged = [r for r in doc["rows"] if r["drift"] and r["drift"]["flag"]]
    fps = {b["dataset_fingerprint"] for b in doc["baselines"]}
    if len(fps) > 1:
        out.append("note: the baselines were recorded on different datasets; drift compares "
                   "only baselines on the newest one's dataset")  # fmt: skip
    out.append(
        f"{len(flagged)} figure(s) drifted the worse way by at least one gate floor since "
        "the oldest comparable baseline" if flagged else
        "no figure drifted the worse way by a gate floor or more"
    )  # fmt: skip
    return "\n".join(out)


def html_page(doc: dict[str, Any]) -> str:
    """The history as one self-contained HTML page."""
    from benchc.report.templating import environment

    return environment().get_template("history.html.j2").render(doc=doc, cell=_cell)


__all__ = ["HistoryError", "history", "html_page", "ordered", "text_table"]
