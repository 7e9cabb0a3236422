"""The figure registry: one record per figure, from which every consumer follows.

The proof that a figure is defined once: a figure registered here (and given a floor, the only
other place a gated figure needs) reaches the gate evidence, the paired check, the payload's
snapshot, the report's Table II and cells, and the snapshot-only baseline map, with no other
code touched."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from benchc.gates import GridEvidence, check, figures
from benchc.gates.payload import Payload
from benchc.metrics import compute_grid
from benchc.metrics import figures as registry
from benchc.metrics.figures import FigureDef, contributions, definition, evaluate
from benchc.report import data
from benchc.report.baseline import SnapshotBaseline, cells_from_snapshots
from benchc.suite.payloads import build_payload

Z3 = lambda level: 3.0  # noqa: E731
#: The gate table's module (``benchc.gates.figures`` the name is the package's function).
gate_figures = importlib.import_module("benchc.gates.figures")


def _max_prob(g) -> np.ndarray:
    """Each valid pair's top option probability under corruption (0 where not counted)."""
    with np.errstate(invalid="ignore"):
        top = np.nanmax(np.where(g.valid[..., None], g.p_corrupt, 0.0), axis=-1)
    return np.where(g.valid, top, 0.0)


MAX_PROB = FigureDef(
    "max_prob", "mean max-prob under corruption", "grid", "pair", "higher", (0.0, 1.0),
    num=_max_prob, den=lambda g: g.valid, column="max p", cells=True, explains="max_prob",
)  # fmt: skip


@pytest.fixture
def max_prob(monkeypatch):
    """The toy figure, registered and gated at the cell and model levels for one test."""
    monkeypatch.setitem(registry.REGISTRY, MAX_PROB.name, MAX_PROB)
    extra = gate_figures.gate("cell", {"max_prob": 0.02}, gated=("max_prob",))
    extra += gate_figures.gate("model", {"max_prob": 0.01}, gated=("max_prob",))
    monkeypatch.setattr(gate_figures, "FIGURES", [*gate_figures.FIGURES, *extra])
    return MAX_PROB


def _evidence(scale: float = 1.0, n: int = 60, seed: int = 3) -> GridEvidence:
    rng = np.random.default_rng(seed)
    answers = rng.integers(0, 4, size=n)
    clean = rng.normal(size=(n, 4)) * 1.5
    clean[np.arange(n), answers] += 1.5
    conds = ("fog-1", "fog-2", "gaussian_noise-1", "gaussian_noise-2")
    by = {c: (clean + rng.normal(size=(n, 4)) * 0.8) * scale for c in conds}
    return GridEvidence.from_conditions(
        [f"s{i:03d}" for i in range(n)], answers, np.full(n, 4), clean, by
    )


def test_an_extra_figure_flows_to_gates_report_and_snapshot_map(max_prob):
    base, cur = _evidence(), _evidence(scale=0.4)  # flatter logits: lower max-prob
    g = base.grid
    want = float(np.nanmean(np.nanmax(g.p_corrupt, axis=-1)))
    # point estimate, cells, replicates and per-sample values, all from the one record
    assert g.figure("max_prob") == pytest.approx(want)
    assert g.cell("max_prob").shape == (2, 2)
    reps = base.replicates(np.ones((3, len(base.ids))))
    np.testing.assert_allclose(reps["max_prob"], want)
    assert base.per_sample("max_prob").shape == (len(base.ids),)
    # the gate: a figure of each level it was given a floor at, checked paired
    assert "max_prob" in [f.name for f in figures("cell", gated_only=True)]
    b = build_payload(base, level="model", scope="model", model="m", dataset="d", info={},
                      seed=0, z_for=Z3, names=["max_prob"])  # fmt: skip
    c = build_payload(cur, level="model", scope="model", model="m", dataset="d", info={},
                      seed=0, z_for=Z3, names=["max_prob"])  # fmt: skip
    assert [r.figure for r in b.rules] == ["max_prob"] and b.figures["max_prob"].mdr > 0
    (o,) = check(b, c, z_for=Z3).outcomes
    assert o.status == "fail" and o.spec.label == "mean max-prob under corruption"
    assert o.movers  # the samples that moved it most are named
    assert check(b, b, z_for=Z3).outcomes[0].status == "pass"
    # the snapshot records it, and the snapshot-only baseline maps it per cell
    cell = build_payload(base.restrict(["fog-1"]), level="cell", scope="fog-1", model="m",
                         dataset="d", info={}, seed=0, z_for=Z3)  # fmt: skip
    snap = Payload.from_json(cell.to_json())
    assert snap.figures["max_prob"].value == pytest.approx(g.cell("max_prob")[0, 0])
    base_map = cells_from_snapshots(SnapshotBaseline(None, {"fog-1": snap}, {}, {}))  # type: ignore[arg-type]
    assert base_map["max_prob"] == {"fog-1": pytest.approx(g.cell("max_prob")[0, 0])}
    # the report: a Table II column and a cell map
    t2 = data.table2(g, seed=0, n_boot=20)
    assert t2["max_prob"]["value"] == pytest.approx(want) and t2["max_prob"]["se"] > 0
    cells = data.cells(g, g.severities)
    assert cells["max_prob"]["fog-2"] == pytest.approx(g.cell("max_prob")[0, 1])


def test_a_name_is_defined_once():
    with pytest.raises(ValueError, match="already defined"):
        registry.register(definition("ras"))
    with pytest.raises(KeyError, match="no figure"):
        definition("acc_corrupt")  # the old name lives only in data formats
    assert definition("accuracy").key == "acc_corrupt"


def test_point_estimate_is_the_replicate_under_unit_weights():
    """The point estimate and the replicates are the same definition summed two ways."""
    rng = np.random.default_rng(0)
    lc = rng.normal(size=(30, 4))
    lx = lc[:, None, None] + rng.normal(size=(30, 3, 2, 4))
    valid = rng.random((30, 3, 2)) > 0.1
    lx[~valid] = np.nan
    g = compute_grid(lc, lx, rng.integers(0, 4, 30), valid=valid)
    point = evaluate("grid", g, cells=True)
    once = evaluate("grid", g, np.ones((1, 30)), cells=True)
    for name, value in point.items():
        np.testing.assert_allclose(once[name][0], value, rtol=1e-12, atol=1e-12, err_msg=name)
    for fig in registry.defined("grid", "pair"):
        if fig.is_mean:
            with warnings.catch_warnings():  # a cell with no counted pair: NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                mean = np.nanmean(contributions(fig, g), axis=0)
            np.testing.assert_allclose(mean, g.cell(fig.name), atol=1e-12, err_msg=fig.name)
