"""The mutant and benign zoos: each mutant does what its name says (and keeps every prediction
where it claims to), and the real gates, on the committed baseline of the embedded model, catch
the meaningful mutants and pass a benign re-measurement."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchc.gates import ErrorBudget, GridEvidence, Payload, check, default_rules
from benchc.gates.snapshot import load_baseline
from benchc.suite.payloads import family_cells
from benchc.testing.dev import zoo

REPO = Path(__file__).resolve().parents[2]
THRESHOLDS = REPO / "thresholds" / "tiny-vlm"


@pytest.fixture(scope="module")
def grid() -> GridEvidence:
    """The embedded model's real option logits over the full grid (the committed sidecar)."""
    return load_baseline(THRESHOLDS / "model-ras.json").evidence  # type: ignore[return-value]


def _preds(ev: GridEvidence) -> np.ndarray:
    return np.argmax(np.where(np.isnan(ev.logits), -np.inf, ev.logits), axis=2)


@pytest.mark.parametrize("mutant", [m for m in zoo.GRID_MUTANTS if m.keeps_predictions])
def test_structural_mutants_keep_every_prediction(grid, mutant):
    for s in mutant.strengths:
        out = mutant.fn(grid, s)
        assert (_preds(out) == _preds(grid)).all()
        assert not np.array_equal(out.logits, grid.logits)
        assert np.array_equal(out.logits[:, 0], grid.logits[:, 0])  # clean untouched


def test_family_fragility_touches_one_family_growing_with_severity(grid):
    out = zoo.family_fragility(grid, 1.0, family="blur")
    delta = (out.logits - grid.logits)[np.arange(len(grid.ids)), :, grid.answers]
    for j, key in enumerate(grid.conditions, start=1):
        corruption, severity = key.rsplit("-", 1)
        expected = -int(severity) / 5.0 if corruption.endswith("blur") else 0.0
        assert np.allclose(delta[:, j], expected), key


def _all_cases(ev: GridEvidence) -> dict[str, tuple[str, GridEvidence]]:
    out = {f"cell:{k}": ("cell", ev.restrict([k])) for k in ev.conditions}
    out |= {
        f"family:{f}": ("family", ev.restrict(c)) for f, c in family_cells(ev.conditions).items()
    }
    out["model"] = ("model", ev)
    return out


def _failing(base: GridEvidence, cur: GridEvidence) -> set[str]:
    budget = ErrorBudget(0.01, {"cell": 570, "family": 30, "model": 10, "vsi": 2})
    failed = set()
    cur_cases = _all_cases(cur)
    for name, (level, ev) in _all_cases(base).items():
        b = Payload(name, level, "m", "d", len(ev.ids), {}, default_rules(level), {}, ev)
        c = Payload(name, level, "m", "d", len(ev.ids), {}, b.rules, {}, cur_cases[name][1])
        failed |= {f"{name}:{o.spec.name}" for o in check(b, c, z_for=budget.z).by_status("fail")}
    return failed


@pytest.mark.slow  # every mutant x strength through the real gates (~11 s)
def test_committed_baseline_gates_catch_meaningful_mutants_and_pass_benign_jitter(grid):
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.05, grid.logits.shape).astype(np.float32)
    jitter = GridEvidence(
        grid.ids, grid.answers, grid.n_options, grid.conditions, grid.logits + noise
    )
    assert _failing(grid, jitter) == set()
    over = _failing(grid, zoo.overconfident_under_corruption(grid, 0.5))
    assert any(f.startswith(("model:", "family:")) for f in over), over
    under = _failing(grid, zoo.underconfident_under_corruption(grid, 0.5))
    assert any(f.startswith("family:") for f in under), under
    fragile = _failing(grid, zoo.family_fragility(grid, 1.0, family="blur"))
    assert "family:blur:accuracy" in fragile, fragile


def test_vision_ignoring_vsi_mutant_keeps_the_probe():
    rng = np.random.default_rng(1)
    from benchc.gates import VSIEvidence

    ev = VSIEvidence([str(i) for i in range(200)], rng.lognormal(-1, 1, 200),
                     rng.random(200) < 0.5, rng.random(200))  # fmt: skip
    out = zoo.vision_ignoring_vsi(ev, 0.5)
    hit = out.vsi < ev.vsi
    assert 60 < hit.sum() < 140 and (out.changed[hit] == 0).all()
    assert np.array_equal(out.probe_correct, ev.probe_correct)


def test_model_hooks_change_answers_not_the_tower(tmp_path):
    from benchc.models import load_backend
    from benchc.tinyvlm.build import build_untrained

    folder = build_untrained(tmp_path / "m")
    images = [np.random.default_rng(i).integers(0, 255, (64, 64, 3), dtype=np.uint8)
              for i in range(3)]  # fmt: skip
    from benchc.models.base import Query

    queries = [Query(image=im, question="Which?", options=("a", "b", "c")) for im in images]
    ref = load_backend(str(folder))
    base_logits, base_feats = ref.forward(queries).option_logits, ref.vision_features(images)
    hooked = zoo.vision_ignoring(load_backend(str(folder)), 0.0)
    assert "vision_ignoring(0)" in hooked.fingerprint
    assert not np.allclose(hooked.forward(queries).option_logits, base_logits)
    np.testing.assert_array_equal(hooked.vision_features(images), base_feats)
    noisy = zoo.weight_noise(load_backend(str(folder)), 1e-3, seed=1)
    diff = np.abs(noisy.forward(queries).option_logits - base_logits).max()
    assert 0 < diff < 0.5 and noisy.fingerprint != ref.fingerprint
