"""docs/spec.md §5 on a real random-weight checkpoint: a tiny Qwen2.5-VL with untrained weights
gives flat next-token distributions, where the 1e-12-floored top-50 VSI read ~1e4 x the full VSI
and called most samples sensitive. The aligned support (each side's own probabilities on the
union of both top-50 supports) agrees with the full VSI within an order of magnitude and makes
the same insensitive decisions."""

from __future__ import annotations

import numpy as np
import torch

from benchc import spec
from benchc.corruptions.vsi import whole_blur
from benchc.metrics.vsi import vsi_aligned, vsi_full
from benchc.models import load_backend
from benchc.models.base import Query
from benchc.testing.dev.tiny_families import build
from benchc_tests.unit.test_models_hf import synthetic_queries


def test_random_weight_model_top50_agrees_with_the_full_vsi(tmp_path):
    torch.set_num_threads(1)
    backend = load_backend(str(build("qwen2_5_vl", tmp_path / "qwen2_5_vl")), batch_size=8)
    clean = synthetic_queries(16, seed=3)
    blurred = [Query(whole_blur(q.image, spec.VSI_SIGMA), q.question, q.options, id=q.id)
               for q in clean]  # fmt: skip
    c = backend.forward(clean, top_k=spec.VSI_TOPK, distribution=True)
    b = backend.forward(blurred, top_k=spec.VSI_TOPK, distribution=True)
    assert c.logprobs.shape[1] > 2 * spec.VSI_TOPK  # top-50 is a real restriction here
    full = vsi_full(c.logprobs, b.logprobs)
    top = vsi_aligned(c.logprobs, b.logprobs, ids_clean=c.top_ids, ids_perturbed=b.top_ids)
    assert np.all(full > 0)
    ratio = top / full
    assert np.all((ratio > 0.1) & (ratio < 10)), ratio
    same = (top < spec.VSI_INSENSITIVE) == (full < spec.VSI_INSENSITIVE)
    assert same.mean() >= 0.9
