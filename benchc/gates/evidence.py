"""Evidence: the per-sample arrays a figure is recomputed from, for both sides of a gate.

A paired gate needs more than a baseline number: it resamples the *same* sample ids on both
sides and recomputes each figure in every replicate. An :class:`Evidence` holds exactly what
that takes, as plain arrays (stored pickle-free next to a snapshot's JSON), and answers four
questions: the figures, their bootstrap replicates under given resample counts, the per-sample
values that explain a move, and a benign re-measurement of itself (the no-change reference that
sets a gate's minimal detectable regression).

Two kinds, one small ABC (after hypothesis' strategies): :class:`GridEvidence` (option logits
of a corruption x severity grid, docs/spec.md §2 and §4) and :class:`VSIEvidence` (per-sample
VSI, argmax change and held-out probe correctness, docs/spec.md §5).
"""

from __future__ import annotations

import hashlib
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import ClassVar

import numpy as np

from benchc import spec
from benchc.metrics.figures import evaluate, per_sample
from benchc.metrics.grid import GridMetrics, grid_from_logits
from benchc.metrics.vsi import ProbeResult, probe_accuracy

#: The benign re-measurement behind every minimal detectable regression (MDR): i.i.d. Gaussian
#: noise of this SD on every option logit, clean included. 0.05 is larger than what bfloat16,
#: another batch size or 1e-3 weight noise did to the embedded model's logits (README, gate
#: power), so an MDR is what a gate can still see through a realistic benign change.
BENIGN_LOGIT_SD = 0.05
#: The VSI counterpart: each sample's VSI multiplied by exp(N(0, SD^2)) (a VSI is a KL of two
#: softmaxes, so benign logit noise moves it by a relative amount), which moves samples across
#: the insensitive threshold and so in and out of the gap's subset.
BENIGN_VSI_LOG_SD = 0.25


class EvidenceError(ValueError):
    """Evidence arrays that are inconsistent or do not match the other side of a gate."""


def _digest(arrays: Mapping[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


class Evidence(ABC):
    """Per-sample arrays of one side of a gate. ``ids`` order the rows."""

    kind: ClassVar[str]

    ids: tuple[str, ...]

    @abstractmethod
    def figures(self) -> dict[str, float]:
        """Every figure key this evidence computes (``FigureSpec.key``) -> value."""

    @abstractmethod
    def replicates(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        """Figure key -> (B,) values under resample ``counts`` (B, N); NaN = undefined."""

    @abstractmethod
    def per_sample(self, name: str) -> np.ndarray | None:
        """Per-sample values (N,) named by ``FigureSpec.per_sample`` (NaN = not counted)."""

    @abstractmethod
    def benign(self, seed: int) -> Evidence:
        """A benign re-measurement of the same model (see :data:`BENIGN_LOGIT_SD`)."""

    @abstractmethod
    def take(self, rows: np.ndarray, ids: Sequence[str] | None = None) -> Evidence:
        """The evidence of ``rows`` (repeats allowed, then give new unique ``ids``)."""

    @abstractmethod
    def arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays (no objects): what the snapshot sidecar stores."""

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Evidence:
        """The inverse of :meth:`arrays`, dispatched on the stored ``kind``."""
        kind = str(np.asarray(arrays.get("kind", "")).item()) if "kind" in arrays else ""
        for sub in (GridEvidence, VSIEvidence):
            if sub.kind == kind:
                return sub._from_arrays(arrays)
        raise EvidenceError(f"unknown evidence kind {kind!r}")

    @classmethod
    @abstractmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Evidence: ...

    @cached_property
    def digest(self) -> str:
        """Content digest of :meth:`arrays` (names the sidecar file; verified on load)."""
        return _digest(self.arrays())

    def align(self, ids: Sequence[str]) -> Evidence:
        """Rows reordered to ``ids``; an error naming the first id missing on this side."""
        where = {sid: i for i, sid in enumerate(self.ids)}
        missing = [sid for sid in ids if sid not in where]
        if missing or len(ids) != len(self.ids):
            extra = sorted(set(self.ids) - set(ids))
            raise EvidenceError(
                f"the two sides hold different samples ({len(self.ids)} vs {len(ids)}; "
                f"first missing here: {missing[:1]}, first extra here: {extra[:1]})"
            )
        if tuple(ids) == self.ids:
            return self
        return self.take(np.array([where[sid] for sid in ids]))


def _as_str_tuple(a: np.ndarray) -> tuple[str, ...]:
    return tuple(str(x) for x in np.asarray(a).tolist())


class GridEvidence(Evidence):
    """Option logits of a full corruption x severity grid plus the clean condition.

    ``logits`` (N, 1 + D*L, K_max) float32, NaN-padded, clean first, then (corruption,
    severity) in ``conditions`` order, which must form a full D x L grid.
    """

    kind = "grid"

    def __init__(
        self,
        ids: Sequence[str],
        answers: np.ndarray,
        n_options: np.ndarray,
        conditions: Sequence[str],
        logits: np.ndarray,
    ) -> None:
        self.ids = tuple(str(i) for i in ids)
        self.answers = np.asarray(answers, dtype=np.int64)
        self.n_options = np.asarray(n_options, dtype=np.int64)
        self.conditions = tuple(conditions)
        self.logits = np.asarray(logits, dtype=np.float32)
        n = len(self.ids)
        if len(set(self.ids)) != n:
            raise EvidenceError("sample ids repeat")
        if self.logits.ndim != 3 or self.logits.shape[:2] != (n, 1 + len(self.conditions)):
            raise EvidenceError(
                f"logits: expected ({n}, {1 + len(self.conditions)}, K), got {self.logits.shape}"
            )
        if self.answers.shape != (n,) or self.n_options.shape != (n,):
            raise EvidenceError(f"answers and n_options must be ({n},)")
        parsed = [spec.parse_condition(c) for c in self.conditions]
        self.corruptions = tuple(dict.fromkeys(c for c, _ in parsed))
        self.severities = tuple(sorted({s for _, s in parsed}))
        expected = [spec.condition_key(c, s) for c in self.corruptions for s in self.severities]
        if list(self.conditions) != expected:
            raise EvidenceError(
                f"conditions {list(self.conditions)[:3]}... do not form a full corruption x "
                "severity grid in corruption-major order"
            )

    # -- construction ---------------------------------------------------------------------
    @classmethod
    def from_conditions(
        cls,
        ids: Sequence[str],
        answers: np.ndarray,
        n_options: np.ndarray,
        clean: np.ndarray,
        by_condition: Mapping[str, np.ndarray],
    ) -> GridEvidence:
        """From per-condition (N, K_max) logits; the conditions' order is kept."""
        keys = list(by_condition)
        logits = np.stack([clean, *(by_condition[k] for k in keys)], axis=1)
        return cls(ids, answers, n_options, keys, logits)

    def restrict(self, conditions: Sequence[str]) -> GridEvidence:
        """The sub-grid of ``conditions`` (each must be here)."""
        index = {c: i + 1 for i, c in enumerate(self.conditions)}
        missing = [c for c in conditions if c not in index]
        if missing:
            raise EvidenceError(f"conditions not in this evidence: {missing[:3]}")
        cols = [0, *(index[c] for c in conditions)]
        return GridEvidence(
            self.ids, self.answers, self.n_options, conditions, self.logits[:, cols]
        )

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "kind": np.array(self.kind),
            "ids": np.array(self.ids, dtype=np.str_),
            "answers": self.answers,
            "n_options": self.n_options,
            "conditions": np.array(self.conditions, dtype=np.str_),
            "logits": self.logits,
        }

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> GridEvidence:
        try:
            return cls(
                _as_str_tuple(arrays["ids"]),
                arrays["answers"],
                arrays["n_options"],
                _as_str_tuple(arrays["conditions"]),
                arrays["logits"],
            )
        except KeyError as exc:
            raise EvidenceError(f"grid evidence lacks array {exc}") from None

    def take(self, rows: np.ndarray, ids: Sequence[str] | None = None) -> GridEvidence:
        rows = np.asarray(rows)
        new_ids = [self.ids[i] for i in rows] if ids is None else list(ids)
        return GridEvidence(
            new_ids, self.answers[rows], self.n_options[rows], self.conditions, self.logits[rows]
        )

    # -- figures ----------------------------------------------------------------------------
    @cached_property
    def grid(self) -> GridMetrics:
        return grid_from_logits(
            self.logits,
            self.answers,
            self.n_options,
            n_severities=len(self.severities),
            corruptions=self.corruptions,
        )

    def figures(self) -> dict[str, float]:
        return self.grid.model_figures()

    def replicates(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        return evaluate("grid", self.grid, np.asarray(counts, dtype=np.float64))

    def per_sample(self, name: str) -> np.ndarray | None:
        return per_sample("grid", self.grid, name)

    def benign(self, seed: int) -> GridEvidence:
        rng = np.random.default_rng([seed, 0xBE9])
        noise = rng.normal(0.0, BENIGN_LOGIT_SD, size=self.logits.shape).astype(np.float32)
        return GridEvidence(
            self.ids, self.answers, self.n_options, self.conditions, self.logits + noise
        )


class VSIEvidence(Evidence):
    """Per-sample VSI (N,), argmax change under the region blur (N,) and the held-out probe's
    correctness (N,) (:func:`benchc.metrics.vsi.probe_accuracy`, fitted over all samples)."""

    kind = "vsi"

    def __init__(
        self,
        ids: Sequence[str],
        vsi: np.ndarray,
        changed: np.ndarray,
        probe_correct: np.ndarray,
    ) -> None:
        self.ids = tuple(str(i) for i in ids)
        self.vsi = np.asarray(vsi, dtype=np.float64)
        self.changed = np.asarray(changed, dtype=np.float64)
        self.probe_correct = np.asarray(probe_correct, dtype=np.float64)
        n = len(self.ids)
        if len(set(self.ids)) != n:
            raise EvidenceError("sample ids repeat")
        for name in ("vsi", "changed", "probe_correct"):
            if getattr(self, name).shape != (n,):
                raise EvidenceError(f"{name} must be ({n},), got {getattr(self, name).shape}")
        if np.isnan(self.vsi).any():
            raise EvidenceError(f"vsi[{int(np.flatnonzero(np.isnan(self.vsi))[0])}] is NaN")

    @classmethod
    def from_run(
        cls, arrays: Mapping[str, np.ndarray], ids: Sequence[str], probe: ProbeResult | None = None
    ) -> VSIEvidence:
        """From a run's stored VSI arrays: argmax change under the blur and the held-out probe
        correctness (the probe fitted with grouped folds over all samples, the known departure
        of docs/spec.md §5; ``probe`` when the caller fitted it already). No tower, or too few
        images for five grouped folds: the probe, and so the gap, is undefined (NaN)."""
        changed = arrays["top1_clean"] != arrays["top1_blur"]
        if probe is None and len(ids) >= 5 and "features_clean" in arrays:
            probe = probe_accuracy(arrays["features_clean"], arrays["features_blur"])
        correct = probe.correct if probe is not None else np.full(len(ids), np.nan)
        return cls(ids, arrays["vsi"], changed, correct)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "kind": np.array(self.kind),
            "ids": np.array(self.ids, dtype=np.str_),
            "vsi": self.vsi,
            "changed": self.changed,
            "probe_correct": self.probe_correct,
        }

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> VSIEvidence:
        try:
            return cls(
                _as_str_tuple(arrays["ids"]),
                arrays["vsi"],
                arrays["changed"],
                arrays["probe_correct"],
            )
        except KeyError as exc:
            raise EvidenceError(f"VSI evidence lacks array {exc}") from None

    def take(self, rows: np.ndarray, ids: Sequence[str] | None = None) -> VSIEvidence:
        rows = np.asarray(rows)
        new_ids = [self.ids[i] for i in rows] if ids is None else list(ids)
        return VSIEvidence(new_ids, self.vsi[rows], self.changed[rows], self.probe_correct[rows])

    @property
    def low(self) -> np.ndarray:
        return self.vsi < spec.VSI_INSENSITIVE

    def figures(self) -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return {k: float(v) for k, v in evaluate("vsi", self).items()}

    def replicates(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        return evaluate("vsi", self, np.asarray(counts, dtype=np.float64))

    def per_sample(self, name: str) -> np.ndarray | None:
        return per_sample("vsi", self, name)

    def benign(self, seed: int) -> VSIEvidence:
        rng = np.random.default_rng([seed, 0x751])
        factor = np.exp(rng.normal(0.0, BENIGN_VSI_LOG_SD, size=self.vsi.shape))
        return VSIEvidence(self.ids, self.vsi * factor, self.changed, self.probe_correct)
