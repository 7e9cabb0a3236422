"""VSI Table 2 recomputed from stored arrays with scikit-learn directly, following the VSI
paper's App. A.4 (docs/spec.md §5): one low-VSI pool fixed by the reference model, each model
probed on that pool with its own tower's features. The report and the gate must agree with it."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import normalize

from benchc.gates import check
from benchc.gates.evidence import VSIEvidence
from benchc.report import data
from benchc.results.reader import read_run
from benchc.suite.payloads import build_payload
from benchc_tests.unit.report_runs import make_dataset, make_run


def paper_probe(fc: np.ndarray, fb: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, float]:
    """App. A.4 on ``rows``: per-image held-out correctness and the fold std."""
    x = normalize(np.concatenate([fc[rows], fb[rows]]).astype(np.float64))
    n = int(rows.sum())
    y = np.r_[np.zeros(n), np.ones(n)]
    groups = np.r_[np.arange(n), np.arange(n)]
    hit = np.zeros(2 * n)
    folds = []
    for train, test in GroupKFold(n_splits=5).split(x, y, groups):
        # L2 is LogisticRegression's default penalty
        clf = LogisticRegression(C=1.0, max_iter=1000).fit(x[train], y[train])
        hit[test] = clf.predict(x[test]) == y[test]
        folds.append(hit[test].mean())
    return (hit[:n] + hit[n:]) / 2, float(np.std(folds))


def table2(arrays: dict, pool: np.ndarray) -> dict[str, float]:
    correct, std = paper_probe(arrays["features_clean"], arrays["features_blur"], pool)
    changed = (arrays["top1_clean"] != arrays["top1_blur"])[pool]
    return {
        "probe": correct.mean(),
        "std": std,
        "change": changed.mean(),
        "gap": (correct - changed).mean(),
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("protocol")
    ds = make_dataset(root / "data", n=120)
    base = read_run(make_run(root / "results", ds, model="ref", seed=0))
    cur = read_run(make_run(root / "results", ds, model="new", seed=1))
    return base, cur


def test_report_and_gate_match_the_paper_protocol(runs):
    base, cur = runs
    pool = base.vsi["vsi_top50"] < 0.05  # fixed by the reference model
    assert not np.array_equal(pool, cur.vsi["vsi_top50"] < 0.05)  # the models disagree
    want_base, want_cur = table2(base.vsi, pool), table2(cur.vsi, pool)

    doc = data.build([base, cur], n_boot=50)
    for series, want in zip(doc["series"], (want_base, want_cur), strict=True):
        g = series["vsi"]["gap"]
        assert g["n_low"] == pool.sum()
        assert g["probe_low"] == pytest.approx(want["probe"], abs=1e-12)
        assert g["probe_low_std"] == pytest.approx(want["std"], abs=1e-12)
        assert g["change_low"] == pytest.approx(want["change"], abs=1e-12)
        assert g["gap"] == pytest.approx(want["gap"], abs=1e-12)
        assert g["probe_low"] - g["change_low"] == pytest.approx(g["gap"], abs=1e-12)
    assert doc["series"][1]["vsi"]["gap"]["pool"] == "reference"

    def payload(run):
        ev = VSIEvidence.from_run(run.vsi, list(run.ids))
        return build_payload(ev, model="m", dataset="d", seed=0, level="vsi", scope="vsi",
                             names=["gap"], info={}, z_for=lambda level: 3.0)  # fmt: skip

    (gap,) = [o for o in check(payload(base), payload(cur), z_for=lambda lv: 3.0).outcomes
              if o.spec.name == "gap"]  # fmt: skip
    assert gap.baseline == pytest.approx(want_base["gap"], abs=1e-12)
    assert gap.current == pytest.approx(want_cur["gap"], abs=1e-12)
    assert "re-probed on the baseline's low-VSI pool" in gap.reason


def test_the_high_vsi_control_is_probed_the_same_way(runs):
    base, _ = runs
    vsi = base.vsi["vsi_top50"]
    pool = vsi < 0.05
    order = np.argsort(-vsi, kind="stable")
    control = np.zeros_like(pool)
    control[[i for i in order if not pool[i]][: pool.sum()]] = True
    want = table2(base.vsi, control)
    g = data.build([base], n_boot=50)["series"][0]["vsi"]["gap"]
    assert g["n_high"] == pool.sum()
    assert g["probe_high"] == pytest.approx(want["probe"], abs=1e-12)
    assert g["probe_high_std"] == pytest.approx(want["std"], abs=1e-12)
    assert g["change_high"] == pytest.approx(want["change"], abs=1e-12)
