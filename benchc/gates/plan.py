"""Power planning: what a recorded baseline's gates can resolve, and how many samples a target
needs (``benchc plan``, docs/guides/gates.md).

From the baseline's own per-sample evidence (its snapshots' sidecars), each gate's minimal
detectable regression (MDR) is computed exactly as a gate run prints it
(:func:`benchc.gates.check.minimal_detectable`, the run's false-alarm budget over the baseline's
gates), and for a target regression, the smallest dataset (drawn like this one) whose MDR is
at most the target: SE_null shrinks as 1/sqrt(n), a share's resolution as 1/n. A target below a
gate's floor cannot be reached by samples (the floor is the rule's: the smallest change that
matters), and says so.

Pure: a baseline folder in, rows out; reading never writes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchc.gates.baselines import snapshot_files
from benchc.gates.budget import DEFAULT_BUDGET, ErrorBudget, case_budget
from benchc.gates.check import minimal_detectable, null_se
from benchc.gates.design import schedule_lines
from benchc.gates.evidence import GridEvidence
from benchc.gates.figures import figure
from benchc.gates.payload import Payload
from benchc.gates.snapshot import load_baseline
from benchc.spec import DEFAULT_SEED

#: The largest dataset a plan searches (a target beyond it is "not reachable").
MAX_SCALE = 1e4


class PlanError(ValueError):
    """A folder with no usable snapshot, or a target that names no gate."""


@dataclass(frozen=True)
class PlanRow:
    """One gate's plan. ``needed``: samples for ``target`` (None: no target, or not reachable
    by more samples, ``why``)."""

    level: str
    scope: str
    figure: str
    n: int
    z: float
    floor: float
    se_null: float
    mdr: float
    target: float | None = None
    needed: int | None = None
    why: str | None = None
    #: The figure's value on the baseline (the room a sequential design's MDR_P has left).
    value: float = float("nan")

    def to_dict(self) -> dict:
        return asdict(self)


def parse_targets(texts: list[str]) -> dict[tuple[str | None, str], float]:
    """``[level:]figure=value`` -> ``{(level or None, figure): value}``."""
    out: dict[tuple[str | None, str], float] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        level, _, name = key.rpartition(":")
        try:
            target = float(value)
        except ValueError:
            target = float("nan")
        if not sep or not name or not (target > 0 and math.isfinite(target)):
            raise PlanError(
                f"--target {text!r}: expected [level:]figure=value with a positive value, "
                "e.g. accuracy=0.02 or model:p_correct=0.01"
            )
        out[(level or None, name)] = target
    return out


def _target(targets: Mapping[tuple[str | None, str], float], level: str, name: str):
    return targets.get((level, name), targets.get((None, name)))


def needed_samples(mdr_at, n: int, target: float, floor: float) -> tuple[int | None, str | None]:
    """The smallest n' whose MDR (``mdr_at(scale)``, scale = n'/n) is at most ``target``: below
    ``n`` too when the target is already met (the samples that suffice, not the ones there
    are)."""
    if target < floor:
        return None, f"below the rule's floor {floor:g} (the smallest change that matters)"
    if mdr_at(MAX_SCALE) > target:
        return None, f"not reachable with {MAX_SCALE:g} x the samples"
    lo, hi = 0, int(n * MAX_SCALE)
    while lo + 1 < hi:  # MDR falls monotonically with n
        mid = (lo + hi) // 2
        if mdr_at(mid / n) <= target:
            hi = mid
        else:
            lo = mid
    return hi, None


@dataclass(frozen=True)
class Grid:
    """The run a plan is for: the suite's grid options as a gate run takes them (None: the
    baseline's own cells, all its samples, one look)."""

    corruptions: tuple[str, ...] | None = None
    severities: tuple[int, ...] | None = None
    limit: int | None = None
    looks: int = 1

    def describe(self, rows: list[PlanRow]) -> str:
        """The grid in words, with what the plan's rows were computed on."""
        cells = sorted({r.scope for r in rows if r.level == "cell"})
        grid_n = max((r.n for r in rows if r.level != "vsi"), default=0)
        vsi_n = max((r.n for r in rows if r.level == "vsi"), default=0)
        samples = f"the first {self.limit} samples" if self.limit is not None else "every sample"
        look = f"; the budget spent over {self.looks} looks" if self.looks > 1 else ""
        vsi = f", the VSI gates on {vsi_n} samples of their set" if vsi_n else ""
        return f"{len(cells)} cells on {samples} (n={grid_n}){vsi}{look}"


def _payloads(folder: Path) -> list[Payload]:
    files = snapshot_files(folder)
    if not files:
        raise PlanError(f"{folder}: no recorded baseline (no case snapshot *.json) in it")
    return [load_baseline(p) for p in files]


def _in_grid(p: Payload, grid: Grid) -> Payload | None:
    """``p`` as a gate run on ``grid`` checks it: a cell outside the grid is not run; a family
    or the model is compared on the grid's cells; every case on the first ``limit`` samples
    (the live check's :func:`benchc.gates.check` restrictions, applied to the baseline)."""
    ev = p.evidence
    if ev is None:
        return None
    if isinstance(ev, GridEvidence) and (grid.corruptions or grid.severities):
        keys = [
            f"{c}-{s}"
            for c in ev.corruptions
            if grid.corruptions is None or c in grid.corruptions
            for s in ev.severities
            if grid.severities is None or s in grid.severities
        ]
        if not keys:
            return None
        ev = ev.restrict(keys) if keys != list(ev.conditions) else ev
    if grid.limit is not None and grid.limit < len(ev.ids):
        ev = ev.take(np.arange(grid.limit))
    return p.with_evidence(ev)


def plan(
    folder: Path,
    *,
    targets: Mapping[tuple[str | None, str], float] | None = None,
    alpha: float = DEFAULT_BUDGET,
    seed: int | None = None,
    grid: Grid = Grid(),
) -> list[PlanRow]:
    """One :class:`PlanRow` per gate a run on ``grid`` checks against the baseline in
    ``folder``, with the MDR that run prints, in snapshot order."""
    targets = dict(targets or {})
    loaded = _payloads(Path(folder))
    _check_targets(targets, loaded, folder)
    payloads = [q for q in (_in_grid(p, grid) for p in loaded) if q is not None]
    budget = case_budget(alpha, payloads, grid.looks, 1, _fractions(loaded, grid))
    rows = []
    for p in payloads:
        run_seed = seed if seed is not None else int(p.info.get("seed") or DEFAULT_SEED)
        rows.extend(_rows(p, budget, targets, run_seed))
    return rows


def _fractions(loaded: list[Payload], grid: Grid) -> tuple[float, ...] | None:
    """The first look's information, as the run's (:func:`benchc.gates.budget.look_fractions`
    of its ``--limit`` over the samples the baseline holds); None for one look."""
    from benchc.gates.budget import look_fractions

    if grid.looks <= 1:
        return None
    model = [p for p in loaded if p.level == "model" and p.evidence is not None]
    total = max((len(p.evidence.ids) for p in model), default=0) or 1  # type: ignore[union-attr]
    return look_fractions(min(grid.limit or total, total), total, grid.looks, 1)


def _check_targets(targets, payloads: list[Payload], folder: Path) -> None:
    known = {(p.level, r.figure) for p in payloads for r in p.rules}
    for level, name in targets:
        if not any(name == f and level in (None, lv) for lv, f in known):
            raise PlanError(
                f"--target {(level + ':') if level else ''}{name}: no gate of that name in "
                f"{folder} (gated: {sorted({f for _, f in known})})"
            )


def _rows(p: Payload, budget: ErrorBudget, targets, seed: int) -> list[PlanRow]:
    assert p.evidence is not None
    nulls = null_se(p.evidence, seed=seed)
    n = len(p.evidence.ids)
    rows = []
    for rule in p.rules:
        if rule.off:
            continue
        spec = figure(p.level, rule.figure)
        z = rule.z if rule.z is not None else budget.z(p.level)
        se = nulls.get(spec.key, float("nan"))

        def mdr_at(scale: float, spec=spec, rule=rule, z=z, se=se, ev=p.evidence) -> float:
            return minimal_detectable(spec, rule, z, se, ev, scale=scale)

        target = _target(targets, p.level, rule.figure)
        needed = why = None
        if target is not None:
            needed, why = needed_samples(mdr_at, n, target, rule.floor)
        value = float(p.figures[rule.figure].value) if rule.figure in p.figures else math.nan
        rows.append(PlanRow(p.level, p.scope, rule.figure, n, z, rule.floor, se, mdr_at(1.0),
                            target, needed, why, value))  # fmt: skip
    return rows


def schedule(
    rows: list[PlanRow], grid: Grid, alpha: float = DEFAULT_BUDGET, total: int | None = None
) -> list[str]:
    """A sequential design's schedule (``--looks K``): samples per look, the model-level and
    VSI gates' boundaries, MDR_P beside the fixed design's MDR, and the expected forward passes
    under no change and under MDR_P (:func:`benchc.gates.design.schedule_lines`). ``total``:
    the samples the baseline holds (default: the rows' own n)."""
    from benchc.gates.budget import look_fractions
    from benchc.gates.design import Design

    if grid.looks <= 1 or not rows:
        return []
    total = total or max(r.n for r in rows if r.level != "vsi")
    n = min(grid.limit or total, total)
    budget = ErrorBudget(
        alpha, _counts(rows), grid.looks, 1, look_fractions(n, total, grid.looks, 1)
    )
    sizes: list[int] = []
    for t in budget.information:
        sizes.append(max(round(t * total), sizes[-1] + 1 if sizes else 1))
    design = Design(tuple(sizes))
    gates = []
    for r in (r for r in rows if r.level in ("model", "vsi")):
        room = figure(r.level, r.figure).room(r.value) if math.isfinite(r.value) else math.inf
        se_full = r.se_null * math.sqrt(r.n / total) if math.isfinite(r.se_null) else 0.0
        room = room if math.isfinite(room) else math.inf
        gates.append(design.gate(budget.alpha_for(r.level), se_full, r.floor, room,
                                 f"{r.level}:{r.figure}"))  # fmt: skip
    return schedule_lines(design, gates)


def _counts(rows: list[PlanRow]) -> dict:
    from collections import Counter

    return dict(Counter(r.level for r in rows))


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.4g}"


def text_table(rows: list[PlanRow]) -> str:
    """Model-level and VSI gates one line each; family and cell gates one line per figure
    (the largest MDR and the most samples any of them needs: the binding one)."""
    head = ("level", "gate", "n", "z", "floor", "MDR now", "target", "samples needed")
    lines: list[tuple[str, ...]] = []
    groups: dict[tuple[str, str], list[PlanRow]] = {}
    for r in rows:
        key = (r.level, r.figure if r.level in ("cell", "family") else f"{r.figure}@{r.scope}")
        groups.setdefault(key, []).append(r)
    order = {"model": 0, "vsi": 1, "family": 2, "cell": 3}
    for (level, _), group in sorted(
        groups.items(), key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])
    ):
        worst = max(group, key=lambda r: r.mdr if math.isfinite(r.mdr) else math.inf)
        name = worst.figure if len(group) == 1 else f"{worst.figure} (worst of {len(group)})"
        blocked = [r for r in group if r.target is not None and r.needed is None]
        need = (
            blocked[0].why
            if blocked
            else str(max(r.needed for r in group if r.needed is not None))
            if any(r.needed is not None for r in group)
            else "-"
        )
        lines.append(
            (
                level,
                name,
                str(worst.n),
                f"{worst.z:.2f}",
                f"{worst.floor:g}",
                _fmt(worst.mdr),
                _fmt(worst.target),
                need,
            )
        )
    widths = [max(len(x) for x in col) for col in zip(head, *lines, strict=True)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*row).rstrip() for row in (head, *lines))


__all__ = [
    "Grid",
    "PlanError",
    "PlanRow",
    "needed_samples",
    "parse_targets",
    "plan",
    "schedule",
    "text_table",
]
