"""The backend interface: what any model must give benchc, and nothing about how.

Batching, caching and ordering live outside (``benchc.models.collate``, ``benchc.results``), so a
backend is only "a batch of queries in, arrays out".
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

if TYPE_CHECKING:
    from benchc.models.args import ArgSpec


@dataclass(frozen=True)
class Query:
    """One model input: an RGB uint8 image (H, W, 3), the question and its options.

    A query built for a backend that reads only files (:attr:`Backend.reads_files`: a server)
    may carry ``image=None`` with ``encoded`` and ``pixel_crc`` set: the cache file, checked
    without decoding (:meth:`benchc.corruptions.CorruptionCache.read_file`); :meth:`pixels`
    decodes it where the pixels are needed after all."""

    image: np.ndarray | None
    question: str
    options: tuple[str, ...]
    hint: str | None = None
    #: Optional sample id, used only to name the sample in error messages.
    id: str | None = None
    #: The PNG file bytes of exactly ``image`` when it was read from one (the corruption
    #: cache): a server backend sends them as they are instead of encoding the pixels again.
    encoded: bytes | None = field(default=None, repr=False, compare=False)
    #: :func:`benchc.data.png.pixel_crc` of the pixels, when the cache recorded it.
    pixel_crc: str | None = field(default=None, repr=False, compare=False)

    def pixels(self) -> np.ndarray:
        """The (H, W, 3) uint8 pixels: ``image``, or ``encoded`` decoded."""
        if self.image is not None:
            return self.image
        from benchc.data.png import decode_rgb

        if self.encoded is None or (decoded := decode_rgb(self.encoded)) is None:
            raise ValueError(f"query {self.id!r} carries neither pixels nor a PNG file")
        return decoded


@dataclass(frozen=True)
class BatchOutput:
    """What one forward pass over a batch of B queries yields.

    ``option_logits``: float32 (B, K_max), NaN where a sample has fewer than K_max options.
    ``option_mass``: float32 (B,), full-vocabulary probability of the sample's K letters together.
    ``logprobs``: float32 (B, V) next-token log-distribution at the answer position, when asked.
    ``top_ids`` / ``top_logprobs``: int64 / float32 (B, k), the top-k of it, when asked for top-k.
    ``letter_counts``: int64 (B, K_max), sampled replies per letter (sampling proxy only; -1 where
    a sample has fewer than K_max options). ``n_unparsed``: int64 (B,), replies that named no
    letter (sampling proxy only; docs/spec.md §3 requires reporting them).
    """

    option_logits: np.ndarray
    option_mass: np.ndarray
    logprobs: np.ndarray | None = None
    top_ids: np.ndarray | None = None
    top_logprobs: np.ndarray | None = None
    letter_counts: np.ndarray | None = None
    n_unparsed: np.ndarray | None = None
    #: float32 (B, D) pooled vision features of the pass's own tower run, when asked
    #: (``forward(features=True)``, white-box backends with a tower).
    features: np.ndarray | None = None


@dataclass(frozen=True)
class Capabilities:
    """What a backend can give, declared once instead of inferred from errors and ``None``s.

    ``white_box``: option logits are exact letter log-probabilities (docs/spec.md §2).
    ``option_distribution``: how p is obtained -- ``"logits"`` (white-box next-token logits),
    ``"logprobs"`` (a server's top-k log-probs, sampling proxy for a query whose letters fall
    outside them) or ``"sampling"`` (docs/spec.md §3 proxy only).
    ``full_distribution``: ``forward(distribution=True)`` gives the full next-token
    log-distribution (VSI's default).
    ``top_k``: the largest ``forward(top_k=k)`` served (``None``: any k; 0: none), for VSI's
    top-k variant.
    ``vision_tower``: ``vision_features`` pools the model's own tower (the gap probe).
    """

    white_box: bool = True
    option_distribution: str = "logits"
    full_distribution: bool = True
    top_k: int | None = None
    vision_tower: bool = True


class Backend(ABC):
    """A model that answers multiple-choice queries with option logits."""

    #: What this backend can give (see :class:`Capabilities`).
    capabilities: Capabilities = Capabilities()
    #: ``--model-args`` keys a backend loaded as ``--model=<module>:<Class>`` accepts
    #: (:class:`~benchc.models.args.ArgSpec` each; see :mod:`benchc.models.registry`).
    model_args_schema: ClassVar[Mapping[str, ArgSpec]] = {}

    #: Stable identity of (weights, revision, dtype, prompt version) for result cache keys.
    fingerprint: str
    #: Human-readable name used for threshold folders (``thresholds/<slug>/``).
    name: str
    #: Default number of queries per ``forward`` call (the collator's batch size).
    batch_size: int = 1

    def length_key(self, query: Query) -> tuple[int, ...]:
        """Sortable key; queries with equal keys have equal prompt lengths (no padding).

        The collator batches equal keys together. The default treats all queries as equal.
        """
        return (0,)

    @abstractmethod
    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        """Score a batch. ``distribution`` asks for the full next-token log-distribution,
        ``top_k`` for only its top-k (to save memory)."""

    def prepare(self, queries: Sequence[Query]) -> Any:
        """The CPU part of :meth:`forward` (prompts, processor, copies to the device), run in a
        background thread while the previous batch computes; must be thread-safe. The default
        leaves all work to :meth:`forward_prepared`."""
        return list(queries)

    def forward_prepared(
        self, batch: Any, *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        """:meth:`forward` on what :meth:`prepare` returned: ``forward_prepared(prepare(q))``
        equals ``forward(q)`` exactly."""
        return self.forward(batch, distribution=distribution, top_k=top_k)

    def release(self, batch: Any) -> None:
        """What :meth:`prepare` returned will not run (a chunk built ahead and dropped): stop
        whatever work it started (a server backend's requests not sent yet). Default: none."""
        return None

    def vision_features(self, images: Sequence[np.ndarray]) -> np.ndarray:
        """Pooled final-layer vision-tower features (B, D): mean of patch tokens.

        Black-box backends have no vision tower and raise ``NotImplementedError``.
        """
        raise NotImplementedError(f"{type(self).__name__} exposes no vision tower")

    #: Whether ``forward`` needs only each query's PNG file (:attr:`Query.encoded`) and never
    #: its pixels: then the suite sends cache hits without decoding them (a server backend).
    reads_files: ClassVar[bool] = False

    #: Whether the model runs in this process (it takes a device; torch sets its CPU threads),
    #: not behind a server. A served backend says False and its runs never import torch.
    computes_locally: ClassVar[bool] = True

    @property
    def local_cpu(self) -> bool:
        """Whether ``forward`` computes on this machine's CPU cores: then reading images ahead
        in other threads only competes with it (a server or a GPU leaves the cores idle)."""
        return False

    def notes(self) -> list[str]:
        """Facts about this process's queries for the run summary (e.g. which path scored
        them); none by default."""
        return []

    @property
    def white_box(self) -> bool:
        """True when option logits are exact (not a sampling estimate)."""
        return self.capabilities.white_box
