"""A gate's minimal detectable regression (MDR) is a regression it catches (docs/spec.md §6).

Opt-in (``-m power``, ~45 s, its own ``.ci/run`` line) but for the 18-sample share case.
Power tests on the embedded baseline's own evidence (the committed snapshots' sidecars), on a
small slice (at most 30 samples) and on the whole dataset: for a share (insensitive fraction),
a mean (model RAS) and the Mixed-cell rate, the recorded MDR is never below the figure's
resolution, and a one-directional regression of 1.5 x MDR (samples move only the worse way)
fails the gate in at least 80 % of seeds (which samples or cells regress, by how much each,
and the bootstrap all vary with the seed). Where 1.5 x MDR does not fit in the room the figure
has left, the gate must say it cannot fail instead. (A change that moves samples both ways
widens its own tolerance beyond the MDR; the verdict says so: the last test.)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchc.gates import ErrorBudget, check
from benchc.gates.check import _moved
from benchc.gates.evidence import GridEvidence, VSIEvidence
from benchc.gates.snapshot import load_baseline
from benchc.metrics.figures import resolution
from benchc.metrics.states import mixed_cells
from benchc.spec import VSI_INSENSITIVE
from benchc.suite.payloads import build_payload

SNAPSHOTS = Path(__file__).resolve().parents[2] / "thresholds" / "tiny-vlm"
#: The default suite's gates (95 cells x 6, 5 families x 9, 15 model-level, 2 VSI).
BUDGET = ErrorBudget(gates={"cell": 570, "family": 45, "model": 15, "vsi": 2})
SEEDS = 10
SMALL = 18


def _payload(ev, level: str, name: str):
    return build_payload(
        ev, level=level, scope=level, model="tiny-vlm", dataset="testbed", info={}, seed=0,
        z_for=BUDGET.z, names=[name], n_boot=1000,
    )  # fmt: skip


def _evidence(case: str, n: int | None):
    path = SNAPSHOTS / f"{case}.json"
    if not path.is_file():  # a re-recorded snapshot is named after its gate
        path = SNAPSHOTS / f"{case.removeprefix('test_')}.json"
    ev = load_baseline(path).evidence
    return ev if n is None else ev.take(np.arange(n))


def _power(level: str, name: str, base_ev, regress) -> tuple[float, int, str | None]:
    """(MDR, failures over SEEDS, powerless reason): ``regress(ev, target, rng)`` returns the
    current evidence, the figure moved in its worse direction by about ``target``."""
    base = _payload(base_ev, level, name)
    (o,) = check(base, base, z_for=BUDGET.z).outcomes
    assert o.mdr >= resolution(name, getattr(base_ev, "grid", base_ev)) - 1e-12
    if o.powerless:
        return o.mdr, 0, o.powerless
    fails = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng(seed)
        cur_ev = regress(base_ev, 1.5 * o.mdr, rng)
        (v,) = check(base, base.with_evidence(cur_ev), z_for=BUDGET.z, seed=seed).outcomes
        assert -o.spec.sign * v.change >= 1.5 * o.mdr * 0.99, "the regression is too small"
        assert _one_way(o.spec, base_ev, cur_ev), "not a one-directional regression"
        fails += v.status == "fail"
    return o.mdr, fails, None


def _one_way(spec, base_ev, cur_ev) -> bool:
    """Samples (cells, for the Mixed-cell rate) moved only the worse way."""
    moved = _moved(spec, base_ev, cur_ev)
    if moved is not None:
        return moved[0] > 0 and moved[1] == 0
    before, _ = mixed_cells(base_ev.grid.cell("r_c"), base_ev.grid.cell("r_w"))
    after, _ = mixed_cells(cur_ev.grid.cell("r_c"), cur_ev.grid.cell("r_w"))
    return bool((after & ~before).any() and not (before & ~after).any())


# -- a share: the insensitive fraction ------------------------------------------------------------
def _turn_insensitive(ev: VSIEvidence, target: float, rng) -> VSIEvidence:
    """Whole samples turn insensitive (VSI / 1e4), none the other way."""
    k = math.ceil(target * len(ev.ids))
    sensitive = np.flatnonzero(ev.vsi >= VSI_INSENSITIVE)
    assert k <= sensitive.size, "not enough sensitive samples for the regression"
    vsi = ev.vsi.copy()
    vsi[rng.choice(sensitive, k, replace=False)] /= 1e4
    return ev.replaced(vsi=vsi)


@pytest.mark.parametrize(
    "n", [SMALL, pytest.param(None, marks=pytest.mark.power)], ids=["18 samples", "1000 samples"]
)
def test_insensitive_fraction_mdr_is_a_regression_the_gate_catches(n):
    ev = _evidence("test_vsi-insensitive_fraction", n)
    mdr, fails, powerless = _power("vsi", "insensitive_fraction", ev, _turn_insensitive)
    assert powerless is None
    assert mdr >= 1 / len(ev.ids)
    print(f"MDR {mdr:.4f}: 1.5 x MDR failed {fails}/{SEEDS}")
    assert fails >= 0.8 * SEEDS, f"MDR {mdr:.4f}: 1.5 x MDR failed only {fails}/{SEEDS}"


def test_the_issue_case_18_samples_mdr_is_at_least_one_sample():
    # 0.111 -> 0.222 on 18 samples passed with "MDR 0.03": the MDR now covers such a change
    ev = _evidence("test_vsi-insensitive_fraction", SMALL)
    base = _payload(ev, "vsi", "insensitive_fraction")
    (o,) = check(base, base, z_for=BUDGET.z).outcomes
    assert o.mdr > 2 / SMALL


# -- a mean: model RAS ----------------------------------------------------------------------------
def _scaled(
    ev: GridEvidence, t: float, cells: np.ndarray | None = None, power: np.ndarray | None = None
) -> GridEvidence:
    """Every corrupted pair's RAS lowered: a correct answer flattened (logits x t), a wrong one
    sharpened (x 1/t); predictions unchanged. ``cells``: only these conditions (columns);
    ``power`` (N,): sample i scaled by t ** power[i] (samples regress by different amounts)."""
    logits = ev.logits.copy()
    corr = logits[:, 1:]
    right = np.nanargmax(np.where(np.isnan(corr), -np.inf, corr), axis=2) == ev.answers[:, None]
    ti = t if power is None else (t**power)[:, None]
    factor = np.where(right, ti, 1.0 / ti)[..., None]
    if cells is not None:
        factor = np.where(np.isin(np.arange(corr.shape[1]), cells)[None, :, None], factor, 1.0)
    logits[:, 1:] = corr * factor
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, logits)


def _lower_ras(ev: GridEvidence, target: float, rng) -> GridEvidence:
    """Model RAS lowered by ``target``, every sample by its own random amount (bisection on
    the common scale)."""
    base = ev.figures()["ras"]
    power = rng.uniform(0.2, 1.8, len(ev.ids))
    lo, hi = 0.01, 1.0
    for _ in range(24):
        mid = (lo + hi) / 2
        if base - _scaled(ev, mid, power=power).figures()["ras"] > target:
            lo = mid
        else:
            hi = mid
    return _scaled(ev, lo, power=power)


@pytest.mark.power
@pytest.mark.parametrize("n", [SMALL, None], ids=["18 samples", "115 samples"])
def test_ras_mdr_is_a_regression_the_gate_catches(n):
    ev = _evidence("test_model-ras", n)
    mdr, fails, powerless = _power("model", "ras", ev, _lower_ras)
    assert powerless is None
    print(f"MDR {mdr:.4f}: 1.5 x MDR failed {fails}/{SEEDS}")
    assert fails >= 0.8 * SEEDS, f"MDR {mdr:.4f}: 1.5 x MDR failed only {fails}/{SEEDS}"


# -- the Mixed-cell rate -------------------------------------------------------------------------
def _mixed_in(ev: GridEvidence, cells: np.ndarray) -> GridEvidence:
    """In ``cells``: clean-correct pairs' RAS lowered, clean-wrong pairs' raised (x 0.25)."""
    down = _scaled(ev, 0.25, cells)
    up = _scaled(ev, 4.0, cells)
    cc = ev.grid.correct_clean[:, None, None]
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions,
                        np.where(cc, down.logits, up.logits))  # fmt: skip


def _more_mixed(ev: GridEvidence, target: float, rng) -> GridEvidence:
    """Cells turned mixed one at a time (random order) until the rate rose by ``target``."""
    base = ev.figures()["mixed_cell_rate"]
    order = rng.permutation(len(ev.conditions))
    for k in range(1, order.size + 1):
        cur = _mixed_in(ev, order[:k])
        if cur.figures()["mixed_cell_rate"] - base >= target:
            return cur
    raise AssertionError("cannot make the Mixed-cell rate regress that far")


@pytest.mark.power
@pytest.mark.parametrize("n", [SMALL, None], ids=["18 samples", "115 samples"])
def test_mixed_cell_rate_mdr_is_a_regression_the_gate_catches(n):
    ev = _evidence("test_model-mixed_cell_rate", n)
    mdr, fails, powerless = _power("model", "mixed_cell_rate", ev, _more_mixed)
    assert mdr >= 100 / len(ev.conditions)
    if powerless is not None:  # then it must be that 1.5 x MDR does not fit
        print(f"MDR {mdr:.4f}: {powerless}")
        assert "cannot fail" in powerless
        return
    print(f"MDR {mdr:.4f}: 1.5 x MDR failed {fails}/{SEEDS}")
    assert fails >= 0.8 * SEEDS, f"MDR {mdr:.4f}: 1.5 x MDR failed only {fails}/{SEEDS}"


def test_a_tolerance_above_the_mdr_says_the_change_moved_samples_both_ways():
    ev = _evidence("test_vsi-insensitive_fraction", None)
    base = _payload(ev, "vsi", "insensitive_fraction")
    rng = np.random.default_rng(0)
    sensitive = rng.permutation(np.flatnonzero(ev.vsi >= VSI_INSENSITIVE))[:60]
    insensitive = rng.permutation(np.flatnonzero(ev.vsi < VSI_INSENSITIVE))[:40]
    vsi = ev.vsi.copy()
    vsi[sensitive] /= 1e4
    vsi[insensitive] *= 1e4
    (o,) = check(base, base.with_evidence(ev.replaced(vsi=vsi)), z_for=BUDGET.z).outcomes
    assert o.tolerance > o.mdr
    assert o.note is not None and "moved samples both ways (60 worse, 40 better)" in o.note
    assert o.to_dict("vsi")["note"] == o.note
    # a one-directional change within the MDR: no note
    vsi = ev.vsi.copy()
    vsi[sensitive[:10]] /= 1e4
    (o,) = check(base, base.with_evidence(ev.replaced(vsi=vsi)), z_for=BUDGET.z).outcomes
    assert o.tolerance <= o.mdr and o.note is None


# -- a share at one cell: corrupted accuracy --------------------------------------------------
def _answers_wrong(ev: GridEvidence, target: float, rng) -> GridEvidence:
    """Whole samples turn wrong in the corrupted condition (the answer's logit swapped with
    the best other option's), none the other way."""
    logits = ev.logits.copy()
    corr = logits[:, 1]  # (N, options): the cell's one corrupted condition
    filled = np.where(np.isnan(corr), -np.inf, corr)
    right = np.flatnonzero(filled.argmax(axis=1) == ev.answers)
    k = math.ceil(target * len(ev.ids))
    assert k <= right.size, "not enough correct samples for the regression"
    for i in rng.choice(right, k, replace=False):
        row = filled[i].copy()
        row[ev.answers[i]] = -np.inf
        j = int(row.argmax())
        corr[i, [ev.answers[i], j]] = corr[i, [j, ev.answers[i]]]
    logits[:, 1] = corr
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, logits)


@pytest.mark.parametrize(
    "n", [30, pytest.param(None, marks=pytest.mark.power)], ids=["30 samples", "115 samples"]
)
def test_cell_accuracy_mdr_is_a_regression_the_gate_catches(n):
    # a cell's accuracy is a share of its samples: a printed MDR of the 0.03 floor was a
    # regression the gate could not see (it needs about z^2 / (n + z^2) of them to move)
    ev = _evidence("test_cell-gaussian_noise-1", n)
    mdr, fails, powerless = _power("cell", "accuracy", ev, _answers_wrong)
    assert mdr >= 1 / len(ev.ids)
    if powerless is not None:
        assert "cannot fail" in powerless
        return
    print(f"MDR {mdr:.4f}: 1.5 x MDR failed {fails}/{SEEDS}")
    assert fails >= 0.8 * SEEDS, f"MDR {mdr:.4f}: 1.5 x MDR failed only {fails}/{SEEDS}"
