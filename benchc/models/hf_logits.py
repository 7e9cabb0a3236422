"""The Hugging Face backend (:mod:`benchc.models.hf`), option-logit extraction: each option's
letter log-probability, the logsumexp over the letter's single-token variants (float32), from
the answer position's next-token log-distribution."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from benchc.spec import LETTERS


def _option_logits(logprobs: torch.Tensor, letters: dict, ks: Sequence[int]) -> np.ndarray:
    """float32 (B, K_max) letter log-probabilities, NaN beyond each row's K."""
    k_max = max(ks)
    cols = []
    for j in range(k_max):
        ids = torch.tensor(letters[LETTERS[j]] or (0,), device=logprobs.device)
        cols.append(torch.logsumexp(logprobs[:, ids], dim=-1))
    out = torch.stack(cols, dim=1).cpu().numpy().astype(np.float32)
    out[np.arange(k_max)[None, :] >= np.asarray(ks)[:, None]] = np.nan
    return out
