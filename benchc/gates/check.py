"""The one gate decision: ``check(baseline, current) -> Verdict`` (docs/spec.md §6).

Pure: two payloads with their evidence in, a verdict out. The pytest cases, the syrupy
comparator and the report all call it, so a figure can never pass in one and fail in another.

For each rule of the case:

* both sides are restricted to the conditions they share and aligned by sample id;
* the same resampled sample ids (fixed seed) are applied to both sides and the figure is
  recomputed on each: the SE of figure(current) - figure(baseline) over those replicates is
  the *paired* SE, which is small when the same samples move the same way on both sides;
* the gate fails when the worse-direction change exceeds ``max(floor, z x SE_diff)``;
  it reports ``improved`` beyond that tolerance the other way, and ``unchecked`` (with the
  reason) when it cannot decide; moving the better way never fails;
* its minimal detectable regression (MDR) is a regression this gate catches: at least
  ``max(floor, z x SE_null)``, SE_null being the paired SE between the baseline and a benign
  re-measurement of it (:meth:`Evidence.benign`); never below the figure's resolution on the
  dataset (one sample's worth of a share, one cell's of a cell rate); and, for a share of whole
  samples (:attr:`FigureSpec.share`), large enough that a regression moving whole samples one
  way still exceeds ``z x`` its own paired SE (:func:`minimal_detectable`). When that exceeds
  the room the figure has left in its worse direction, the gate cannot fail on this dataset
  and says how many samples it would need;
* when the tolerance applied to a change exceeds the MDR, the verdict says why: samples moved
  both ways (or unevenly), which widens the paired SE of that change (:attr:`Outcome.note`);
* a change the worse way beyond the printed MDR but inside that widened tolerance is
  ``unresolved``, never ``pass``: the MDR promised to catch a regression that size, and this
  run's own variance could not tell. It says the change, its z (change / paired SE) and how many
  samples would resolve it at this run's paired variance (:attr:`Outcome.resolve_n`).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from benchc.gates.evidence import Evidence, EvidenceError, GridEvidence
from benchc.gates.figures import FigureSpec, Level, figure
from benchc.gates.payload import Payload
from benchc.gates.rules import GateRule
from benchc.metrics.figures import REGISTRY, resolution
from benchc.metrics.stats import replicate_se, resample_counts
from benchc.spec import DEFAULT_SEED

#: Paired bootstrap replicates: the SE of an SE estimate is ~ SE / sqrt(2 B), 2 % at 1000.
N_BOOT = 1000
#: How many samples a failure names.
MOVERS = 5

ZFor = Callable[[Level], float]


@dataclass(frozen=True)
class Outcome:
    """One gate's verdict. ``status``: pass, fail, unresolved (worse than the MDR, inside the
    run's own tolerance), improved, unchecked or off (the rule is switched off in the
    snapshot)."""

    spec: FigureSpec
    rule: GateRule
    scope: str
    status: str
    baseline: float = float("nan")
    current: float = float("nan")
    z: float = float("nan")
    se_diff: float = float("nan")
    se_null: float = float("nan")
    tolerance: float = float("nan")
    mdr: float = float("nan")
    n: int = 0
    reason: str | None = None
    movers: tuple[tuple[str, float, float], ...] = ()
    #: The gate cannot fail on this dataset (its MDR exceeds the figure's room); why.
    powerless: str | None = None
    #: Samples whose own value moved (worse, better) under this change.
    moved: tuple[int, int] | None = None
    #: The baseline's samples (a ``--limit`` run compares on its first ``n``; the rest are
    #: what a sequential gate's next look can add).
    n_available: int = 0

    @property
    def note(self) -> str | None:
        """Why the tolerance applied to this change exceeds the MDR (None when it does not)."""
        if not (math.isfinite(self.tolerance) and math.isfinite(self.mdr)):
            return None
        if self.tolerance <= self.mdr * (1 + 1e-9):
            return None
        head = f"tolerance {self.tolerance:.4g} exceeds the MDR {self.mdr:.4g}"
        if self.moved is None:
            return f"{head}: this change's own paired SE is wider than a benign one's"
        worse, better = self.moved
        if worse and better:
            return (
                f"{head}: this change moved samples both ways ({worse} worse, {better} better), "
                "which widens its paired SE"
            )
        return (
            f"{head}: this change moved {worse + better} samples unevenly, which widens its "
            "paired SE"
        )

    @property
    def change(self) -> float:
        return self.current - self.baseline

    @property
    def z_change(self) -> float:
        """The change in paired SEs (signed: negative is worse for a higher-is-better figure)."""
        if not (math.isfinite(self.se_diff) and self.se_diff > 0):
            return float("nan")
        return self.change / self.se_diff

    @property
    def resolve_n(self) -> int | None:
        """Samples that would resolve this change at the run's own paired variance: the paired
        SE shrinks as 1/sqrt(n), so ``worse > z x SE`` once ``n' > n (z SE / worse)^2``. None
        when the change is not the worse way or nothing is known of its variance."""
        worse = self.worse_by
        if not (worse > 0 and math.isfinite(self.se_diff) and math.isfinite(self.z)):
            return None
        return max(self.n, math.floor(self.n * (self.z * self.se_diff / worse) ** 2) + 1)

    @property
    def worse_by(self) -> float:
        """How far the figure moved in its worse direction (negative: it improved)."""
        return -self.spec.sign * self.change

    def to_dict(self, case: str) -> dict[str, Any]:
        """The verdict record the report, the JUnit properties and the summary read."""

        def num(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "case": case,
            "scope": self.scope,
            "level": self.spec.level,
            "figure": self.spec.name,
            "label": self.spec.label,
            "direction": self.spec.direction,
            "baseline": num(self.baseline),
            "current": num(self.current),
            "change": num(self.change),
            "tolerance": num(self.tolerance),
            "mdr": num(self.mdr),
            "se_diff": num(self.se_diff),
            "se_null": num(self.se_null),
            "floor": self.rule.floor,
            "z": num(self.z),
            "n": self.n,
            "status": self.status,
            "reason": self.reason or self.powerless,
            "powerless": self.powerless is not None,
            "movers": [[sid, num(b), num(c)] for sid, b, c in self.movers],
            "note": self.note,
            "n_available": self.n_available,
            "z_change": num(self.z_change),
            "resolve_n": self.resolve_n if self.status == "unresolved" else None,
        }


@dataclass(frozen=True)
class Verdict:
    """Every rule's outcome for one case."""

    scope: str
    outcomes: tuple[Outcome, ...] = field(default_factory=tuple)

    def by_status(self, status: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == status]

    @property
    def failed(self) -> bool:
        return any(o.status == "fail" for o in self.outcomes)


#: (digest, n_boot, seed, benign) -> (figures, replicates): evidence is immutable and named by
#: its content, so a baseline checked by many cases (model-level figures, a power benchmark) is
#: measured once.
_MEMO: OrderedDict[tuple, tuple[dict, dict]] = OrderedDict()
_MEMO_SIZE = 32


def _measured(ev: Evidence, n_boot: int, seed: int, *, benign: bool = False):
    key = (ev.digest, n_boot, seed, benign, tuple(REGISTRY))  # a figure registered later counts
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key]
    src = ev.benign(seed) if benign else ev
    out = (src.figures(), src.replicates(resample_counts(len(ev.ids), n_boot, seed)))
    _MEMO[key] = out
    if len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return out


def _intersect(base: Evidence, cur: Evidence) -> tuple[Evidence, Evidence, str | None]:
    """Both grids on the cells they share (a subset run is checked on its cells)."""
    if not isinstance(base, GridEvidence) or not isinstance(cur, GridEvidence):
        return base, cur, None
    if base.conditions == cur.conditions:
        return base, cur, None
    corr = [c for c in base.corruptions if c in cur.corruptions]
    sev = [s for s in base.severities if s in cur.severities]
    keys = [f"{c}-{s}" for c in corr for s in sev]
    if not keys:
        raise EvidenceError("baseline and current share no corruption x severity cell")
    note = f"compared on the {len(keys)} cells both sides have (baseline {len(base.conditions)})"
    return base.restrict(keys), cur.restrict(keys), note


def shared_samples(base: Evidence, cur: Evidence) -> tuple[Evidence, str | None]:
    """A run on some of the baseline's samples (``--limit``) is checked on those samples."""
    mine = set(cur.ids)
    if not mine < set(base.ids):
        return base, None
    rows = np.array([i for i, sid in enumerate(base.ids) if sid in mine])
    note = f"compared on the {len(rows)} samples both sides have (baseline {len(base.ids)})"
    return base.take(rows), note


def _movers(
    spec: FigureSpec, base: Evidence, cur: Evidence
) -> tuple[tuple[str, float, float], ...]:
    if spec.per_sample is None:
        return ()
    b, c = base.per_sample(spec.per_sample), cur.per_sample(spec.per_sample)
    if b is None or c is None:
        return ()
    worse = -spec.sign * (c - b)
    ok = np.isfinite(worse) & (worse > 0)
    order = sorted(np.flatnonzero(ok), key=lambda i: (-worse[i], base.ids[i]))[:MOVERS]
    return tuple((base.ids[i], float(b[i]), float(c[i])) for i in order)


def _moved(spec: FigureSpec, base: Evidence, cur: Evidence) -> tuple[int, int] | None:
    """How many samples' own values moved worse and better (None: no per-sample values)."""
    if spec.per_sample is None:
        return None
    b, c = base.per_sample(spec.per_sample), cur.per_sample(spec.per_sample)
    if b is None or c is None:
        return None
    worse = -spec.sign * (c - b)
    ok = np.isfinite(worse)
    return int((worse[ok] > 1e-12).sum()), int((worse[ok] < -1e-12).sum())


def _share_mdr(z: float, se_null: float, units: float, step: float) -> float:
    """The smallest one-directional regression of a share that exceeds ``z x`` its own paired
    SE: Delta samples' worth of whole-sample moves add ``Delta (step - Delta) / units`` to the
    benign variance, so solve ``Delta^2 = z^2 (SE_null^2 + Delta (step - Delta) / units)``."""
    a = 1.0 + z * z / units
    b = z * z * step / units
    c = z * z * se_null * se_null
    return (b + math.sqrt(b * b + 4.0 * a * c)) / (2.0 * a)


def minimal_detectable(
    spec: FigureSpec,
    rule: GateRule,
    z: float,
    se_null: float,
    ev: Evidence,
    *,
    scale: float = 1.0,
) -> float:
    """The gate's MDR on evidence ``ev`` (the module docstring): ``max(floor, z x SE_null)``,
    never below the figure's resolution there, and for a share of whole samples never below
    the one-directional regression that exceeds its own paired SE. ``scale``: the MDR on a
    dataset ``scale`` times as large, drawn alike (SE_null shrinks as 1/sqrt(scale), the
    resolution as 1/scale): what :mod:`benchc.gates.plan` sizes a dataset with."""
    se_null = se_null / math.sqrt(scale) if math.isfinite(se_null) else se_null
    mdr = max(rule.floor, z * se_null) if math.isfinite(se_null) else rule.floor
    res = resolution(spec.name, ev.grid if isinstance(ev, GridEvidence) else ev) / scale
    if not math.isfinite(res):
        return mdr
    mdr = max(mdr, res)
    units = spec.definition.units
    if spec.share and units is not None and res > 0:
        step = units[1]
        se = se_null if math.isfinite(se_null) else 0.0
        mdr = max(mdr, _share_mdr(z, se, step / res, step))
    return mdr


def _beyond_mdr(spec: FigureSpec, worse: float, mdr: float, n_boot: int) -> bool:
    """A change the MDR promised to catch: worse than the MDR beyond the MDR's own estimation
    error (an SE from ``n_boot`` replicates is off by ~1/sqrt(2 B) of itself: two of those),
    for a figure over the baseline's population. R_c, R_w, relative robustness and the
    Mixed-cell rate count the side's *own* clean-correct (or -wrong) pairs; a benign clean flip
    moves a sample between their populations wholesale, which the MDR's fixed-population
    promise does not cover (their note still says when samples moved both ways)."""
    if spec.definition.own_population or not math.isfinite(mdr):
        return False
    return worse > mdr * (1.0 + 2.0 / math.sqrt(2.0 * n_boot))


def null_se(ev: Evidence, *, seed: int = DEFAULT_SEED, n_boot: int = N_BOOT) -> dict[str, float]:
    """Every figure's SE_null on ``ev``: the paired SE between it and a benign re-measurement
    of itself (:meth:`Evidence.benign`), the noise part of every MDR."""
    _, rb = _measured(ev, n_boot, seed)
    _, rn = _measured(ev, n_boot, seed, benign=True)
    return {k: float(replicate_se(rn[k] - rb[k])) for k in rb if k in rn}


def _powerless(spec: FigureSpec, rule: GateRule, base: float, mdr: float, zse: float, n: int):
    room = spec.room(base)
    if not math.isfinite(room) or mdr < room:
        return None
    if rule.floor >= room:
        return (
            f"this gate cannot fail on this dataset: its floor {rule.floor:g} exceeds the "
            f"{room:.4g} the figure can still move in its worse direction"
        )
    head = (
        f"this gate cannot fail on this dataset: minimal detectable regression {mdr:.4g} >= "
        f"room {room:.4g}"
    )
    needed = math.ceil(n * (zse / room) ** 2) - n if zse > 0 else 0
    if needed <= 0:  # not noise: the figure's resolution on this many counted units sets it
        return (
            f"{head}; its paired SE is {'0' if zse <= 0 else 'small'} here, so the MDR is set by "
            "the figure's resolution on this dataset (one sample, pair or cell's worth): only "
            "more of them give it power"
        )
    return f"{head}; about {needed} more sample{'s' if needed > 1 else ''} needed"


@dataclass(frozen=True)
class _Pair:
    """Both sides of one case, aligned and measured: the figures and bootstrap replicates of
    each, the baseline's benign SEs, and the note on what was compared."""

    base: Evidence
    cur: Evidence
    fb: dict
    rb: dict
    fc: dict
    rc: dict
    nulls: dict[str, float]
    note: str | None
    n_available: int

    @property
    def n(self) -> int:
        return len(self.base.ids)


def _aligned(base_ev: Evidence, cur_ev: Evidence) -> tuple[Evidence, Evidence, str | None, int]:
    """Both sides on the cells and samples they share, aligned by sample id, with the note on
    what was compared and the baseline's samples (raises :class:`EvidenceError` when they
    cannot be compared)."""
    base_ev, cur_ev, note = _intersect(base_ev, cur_ev)
    n_available = len(base_ev.ids)
    base_ev, shared = shared_samples(base_ev, cur_ev)
    cur_ev, paired = cur_ev.align(base_ev.ids).paired_with(base_ev)
    return base_ev, cur_ev, "; ".join(x for x in (note, shared, paired) if x) or None, n_available


def _pair(
    base_ev: Evidence, cur_ev: Evidence, note: str | None, n_available: int, seed: int, n_boot: int
) -> _Pair:
    """The aligned sides measured with the same resampled ids."""
    fb, rb = _measured(base_ev, n_boot, seed)
    fc, rc = _measured(cur_ev, n_boot, seed)
    nulls = null_se(base_ev, seed=seed, n_boot=n_boot)
    return _Pair(base_ev, cur_ev, fb, rb, fc, rc, nulls, note, n_available)


def _status(spec: FigureSpec, worse: float, tol: float, mdr: float, n_boot: int) -> str:
    if worse > tol:
        return "fail"
    if _beyond_mdr(spec, worse, mdr, n_boot):
        return "unresolved"
    return "improved" if -worse > tol else "pass"


def _outcome(
    rule: GateRule, spec: FigureSpec, p: _Pair, z: float, scope: str, n_boot: int
) -> Outcome:
    """One rule's outcome on a measured pair (the module docstring's steps)."""
    b, c = p.fb[spec.key], p.fc[spec.key]
    se_diff = float(replicate_se(p.rc[spec.key] - p.rb[spec.key]))
    se_null = p.nulls[spec.key]
    tol = max(rule.floor, z * se_diff) if math.isfinite(se_diff) else rule.floor
    mdr = minimal_detectable(spec, rule, z, se_null, p.base)
    common = dict(
        baseline=b, current=c, z=z, se_diff=se_diff, se_null=se_null, tolerance=tol,
        mdr=mdr, n=p.n, reason=p.note, n_available=p.n_available,
    )  # fmt: skip
    if rule.off:
        why = f"switched off in the snapshot (rule '{rule}')"
        return Outcome(spec, rule, scope, "off", **{**common, "reason": why})
    if not math.isfinite(b):
        why = f"{spec.name} is undefined on the baseline (no sample counts towards it)"
        return Outcome(spec, rule, scope, "unchecked", **{**common, "reason": why})
    if not math.isfinite(c):
        why = f"{spec.name} became undefined (baseline {b:.4g})"
        return Outcome(spec, rule, scope, "fail", **{**common, "reason": why})
    status = _status(spec, -spec.sign * (c - b), tol, mdr, n_boot)
    return Outcome(
        spec, rule, scope, status, **common,
        movers=_movers(spec, p.base, p.cur) if status in _EXPLAINED else (),
        powerless=_powerless(spec, rule, b, mdr, z * se_null, p.n),
        moved=_moved(spec, p.base, p.cur) if tol > mdr else None,
    )  # fmt: skip


def check(
    baseline: Payload,
    current: Payload,
    *,
    z_for: ZFor,
    seed: int = DEFAULT_SEED,
    n_boot: int = N_BOOT,
    rules: Sequence[GateRule] | None = None,
) -> Verdict:
    """Paired verdict of ``current`` against ``baseline`` under ``rules`` (default: the
    baseline's). ``z_for(level)`` gives a rule's z unless the rule fixes its own."""
    rules = tuple(baseline.rules if rules is None else rules)
    level, scope = baseline.level, current.scope
    specs = [(r, figure(level, r.figure)) for r in rules]

    def unchecked(reason: str) -> Verdict:
        return Verdict(
            scope, tuple(Outcome(s, r, scope, "unchecked", reason=reason) for r, s in specs)
        )

    if baseline.evidence is None or current.evidence is None:
        side = "baseline" if baseline.evidence is None else "current run"
        return unchecked(f"the {side} has no per-sample evidence")
    try:
        aligned = _aligned(baseline.evidence, current.evidence)
    except EvidenceError as exc:
        return unchecked(f"not comparable: {exc}")
    pair = _pair(*aligned, seed, n_boot)
    return Verdict(scope, tuple(
        _outcome(r, s, pair, r.z if r.z is not None else z_for(level), scope, n_boot)
        for r, s in specs
    ))  # fmt: skip


def _fmt(x: Any, spec: str = ".4g") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return format(x, spec)


def unresolved_text(r: Mapping[str, Any]) -> str:
    """One unresolved gate's line, from its record (:meth:`Outcome.to_dict`): the figure, its
    scope, the change, its z and the samples that would resolve it. The terminal, the report,
    JUnit and the exporters all print this one text."""
    need = r.get("resolve_n")
    if str(r.get("reason") or "").startswith("look "):  # a sequential design's undecided gate
        return (
            f"{r.get('figure')} in {r.get('scope')}: {_fmt(r.get('baseline'))} -> "
            f"{_fmt(r.get('current'))} (change {_fmt(r.get('change'), '+.4g')}), {r['reason']}"
            + (f"; the next look takes {need} samples (n={r.get('n')} now)" if need else "")
        )
    return (
        f"{r.get('figure')} in {r.get('scope')}: {_fmt(r.get('baseline'))} -> "
        f"{_fmt(r.get('current'))} (change {_fmt(r.get('change'), '+.4g')}, z "
        f"{_fmt(r.get('z_change'), '+.2f')}) is worse than its minimal detectable regression "
        f"{_fmt(r.get('mdr'))} but inside this run's tolerance {_fmt(r.get('tolerance'))}"
        + (f"; about {need} samples would resolve it (n={r.get('n')} now)" if need else "")
    )


#: Statuses whose message names the samples that moved most.
_EXPLAINED = ("fail", "unresolved")


def describe(outcome: Outcome, current: Payload) -> list[str]:
    """The failure text docs/spec.md §6 asks for: figure, scope, baseline, current, tolerance,
    MDR and the samples that contributed most."""
    o, r, s = outcome, outcome.rule, outcome.spec
    lines = [
        f"gate {o.status.upper()}: {s.name} in {o.scope} ({s.label}; "
        f"model {current.model}, dataset {current.dataset}, n={o.n})",
    ]
    if o.reason and o.status not in _EXPLAINED:
        lines.append(f"  {o.reason}")
    if not math.isfinite(o.baseline):
        return lines
    lines += [
        f"  baseline {o.baseline:.4f}  current {o.current:.4f}  change {o.change:+.4f}, "
        f"{s.direction} is better",
        f"  tolerance {o.tolerance:.4f} = max(floor {r.floor:g}, z {o.z:.2f} x paired SE "
        f"{o.se_diff:.4f})   minimal detectable regression {o.mdr:.4f}   rule '{r}'",
    ]
    if o.note:
        lines.append(f"  {o.note}")
    if o.status == "unresolved":
        lines.append(f"  unresolved: {unresolved_text(o.to_dict(''))}")
    if o.reason and o.status in _EXPLAINED:
        lines.append(f"  {o.reason}")
    if o.movers:
        lines.append(f"  samples that moved most ({s.per_sample}, baseline -> current):")
        lines.extend(f"    {sid}: {b:.3f} -> {c:.3f}" for sid, b, c in o.movers)
    return lines
