"""A model for the cluster tests whose device "runs out of memory" above 2 rows a forward pass:
the real ``HFBackend`` path splits the batch (as on a CUDA OOM), which a distributed run must
refuse to store (``--model=benchc_tests.cluster.oom:TwoRowsFit``)."""

from __future__ import annotations

import torch

from benchc.models.hf import HFBackend
from benchc.suite.config import DEFAULT_MODEL


class TwoRowsFit(HFBackend):
    def __init__(self, batch_size: int = 4, **kwargs) -> None:
        super().__init__(DEFAULT_MODEL, batch_size=batch_size)

    def _last_logits(self, inputs, ready=None, *, features=False, n=0):
        if n > 2:
            raise torch.OutOfMemoryError(f"CUDA out of memory (simulated: {n} rows > 2)")
        return super()._last_logits(inputs, ready, features=features, n=n)
