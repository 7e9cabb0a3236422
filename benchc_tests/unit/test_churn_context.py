"""Issue 50: beside a negative-flip gate, the answers that turned right too (churn in context).

Built from evidence whose right and wrong answers are set pair by pair, so every count is known:
the right -> wrong and wrong -> right answers, the net change, the samples that turned right
(most first), and the "trade" line only when as many answers turned right as wrong.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from benchc.gates.churn import churn, churn_lines
from benchc.gates.evidence import GridEvidence

CONDITIONS = ("fog-1", "fog-2")


def _evidence(right: np.ndarray) -> GridEvidence:
    """``right``: (N, 3) bool, clean then fog-1, fog-2; answer 0 is right, 1 is wrong."""
    n = right.shape[0]
    logits = np.zeros((n, 3, 2), np.float32)
    logits[..., 0] = np.where(right, 2.0, -2.0)
    return GridEvidence([f"s{i}" for i in range(n)], np.zeros(n), np.full(n, 2), CONDITIONS, logits)


def _pair(lost: list[tuple[int, int]], gained: list[tuple[int, int]], n: int = 10):
    base = np.ones((n, 3), bool)
    for row, col in gained:
        base[row, col] = False
    cur = base.copy()
    for row, col in lost:
        cur[row, col] = False
    for row, col in gained:
        cur[row, col] = True
    return _evidence(base), _evidence(cur)


def test_churn_counts_both_directions_on_the_corrupted_pairs():
    base, cur = _pair(lost=[(0, 1), (1, 2), (2, 0)], gained=[(5, 1), (5, 2), (6, 1)])
    found = churn(base, cur, clean=False)
    assert found is not None
    # (2, 0) is the clean condition: not a corrupted pair
    assert (found.lost, found.gained, found.units) == (2, 3, 20)
    assert found.gained_samples == (("s5", 2), ("s6", 1))
    clean = churn(base, cur, clean=True)
    assert clean is not None and (clean.lost, clean.gained, clean.units) == (1, 0, 10)


def _outcome(name: str) -> SimpleNamespace:
    return SimpleNamespace(spec=SimpleNamespace(name=name), scope="model")


def test_churn_lines_say_a_trade_from_a_loss():
    base, cur = _pair(lost=[(0, 1), (1, 2)], gained=[(5, 1), (6, 1), (7, 2)])
    lines = churn_lines(
        [_outcome("negative_flips"), _outcome("accuracy")],
        SimpleNamespace(evidence=base),
        SimpleNamespace(evidence=cur),
    )
    assert lines[0] == "negative_flips in model:"
    assert lines[1] == (
        "  churn: 2 right -> wrong, 3 wrong -> right (net +1 right) over 20 "
        "(sample, corrupted condition) pairs"
    )
    assert (
        lines[2]
        == "  samples that moved wrong -> right (answers turned right): s5 (1), s6 (1), s7 (1)"
    )
    assert "a trade, not only a loss" in lines[3]
    assert len(lines) == 4  # the accuracy gate gets no churn line


def test_a_loss_only_is_not_called_a_trade():
    base, cur = _pair(lost=[(0, 1), (1, 2)], gained=[])
    lines = churn_lines(
        [_outcome("negative_flips")], SimpleNamespace(evidence=base), SimpleNamespace(evidence=cur)
    )
    assert lines == [
        "negative_flips in model:",
        "  churn: 2 right -> wrong, 0 wrong -> right (net -2 right) over 20 "
        "(sample, corrupted condition) pairs",
    ]


def test_no_churn_without_grid_evidence():
    base, _ = _pair(lost=[(0, 1)], gained=[])
    none = SimpleNamespace(evidence=None)
    assert churn_lines([_outcome("negative_flips")], none, SimpleNamespace(evidence=base)) == []
