"""The VSI run's whole-image pass: rows whose region blur fell back to the whole image reuse
their region output (the same image), the others are scored, and row order is kept."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from benchc.models.base import BatchOutput, Query
from benchc.suite.vsi import whole_pass


def _queries(n: int) -> list[Query]:
    img = np.zeros((4, 4, 3), np.uint8)
    return [Query(image=img, question="q", options=("a", "b"), id=f"s{i}") for i in range(n)]


def _output(values: list[float]) -> BatchOutput:
    v = np.asarray(values, np.float32)
    return BatchOutput(option_logits=np.c_[v, -v], option_mass=np.ones(len(v), np.float32),
                       top_ids=np.c_[v.astype(np.int64)], top_logprobs=np.c_[v])  # fmt: skip


def test_fallback_rows_reuse_the_region_output_and_the_rest_are_scored_in_order():
    whole = _queries(5)
    region = _output([10, 11, 12, 13, 14])
    seen: list[list[str]] = []

    def scored(queries: list[Query]) -> BatchOutput:
        seen.append([q.id for q in queries])
        return _output([100 + int(q.id[1:]) for q in queries])

    fallback = np.array([True, False, True, False, False])
    out = whole_pass(whole, fallback, region, scored)
    assert seen == [["s1", "s3", "s4"]]  # only the rows that have a region
    np.testing.assert_array_equal(out.option_logits[:, 0], [10, 101, 12, 103, 104])
    np.testing.assert_array_equal(out.top_ids[:, 0], [10, 101, 12, 103, 104])
    seen.clear()
    assert whole_pass(whole, np.ones(5, bool), region, scored) is region and seen == []
    whole_pass(whole, np.zeros(5, bool), region, scored)
    assert seen == [[f"s{i}" for i in range(5)]]
    # the region pass's tower features (the gap probe's) are not the whole pass's
    with_features = replace(region, features=np.ones((5, 3), np.float32))
    out = whole_pass(whole, fallback, with_features, scored)
    assert out.features is None
    np.testing.assert_array_equal(out.option_logits[:, 0], [10, 101, 12, 103, 104])
