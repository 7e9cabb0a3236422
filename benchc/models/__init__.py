"""Model backends: a batch of queries in, option logits out (see ``base.Backend``).

Heavy imports (torch, transformers) stay in the backend modules, loaded on first use.
"""

from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.collate import Collator, score
from benchc.models.registry import BackendEntry, load_backend

__all__ = [
    "Backend",
    "BackendEntry",
    "BatchOutput",
    "Collator",
    "Query",
    "load_backend",
    "score",
]
