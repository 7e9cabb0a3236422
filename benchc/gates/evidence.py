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
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from functools import cached_property
from typing import Any, ClassVar

import numpy as np

from benchc import spec
from benchc.metrics.figures import evaluate, per_sample
from benchc.metrics.grid import GridMetrics, grid_from_logits, split_conditions
from benchc.metrics.options import require_answered
from benchc.metrics.vsi import ProbeResult, low_pool, matched_control, pool_probe

#: The benign re-measurement behind every minimal detectable regression (MDR): i.i.d. Gaussian
#: noise of this SD on every option logit, clean included. 0.05 is larger than what bfloat16,
#: another batch size or 1e-3 weight noise did to the embedded model's logits
#: (docs/measurements.md, gate power), so an MDR is what a gate can still see through a
#: realistic benign change.
BENIGN_LOGIT_SD = 0.05
#: The VSI counterpart: each sample's VSI multiplied by exp(N(0, SD^2)) (a VSI is a KL of two
#: softmaxes, so benign logit noise moves it by a relative amount), which moves samples across
#: the insensitive threshold and so in and out of the gap's subset.
BENIGN_VSI_LOG_SD = 0.25


class EvidenceError(ValueError):
    """Evidence arrays that are inconsistent or do not match the other side of a gate."""


def digest_arrays(arrays: Mapping[str, np.ndarray]) -> str:
    """Content digest of named arrays (names, dtypes, shapes and bytes)."""
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
        return digest_arrays(self.arrays())

    def paired_with(self, baseline: Evidence) -> tuple[Evidence, str | None]:
        """This (current) side made comparable with ``baseline`` once aligned to its ids, and
        a note saying how when it had to change (VSI: the baseline's pool)."""
        return self, None

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


class OrderLogits:
    """The option logits of a grid's rotated conditions (docs/spec.md §1, option order):
    ``conditions`` (clean and at most one cell per corruption), ``logits`` (N, C, R_max - 1,
    K_max) float32 under each sample's rotations other than 0 (rotation 0 is the grid's own
    logits), ``offsets`` (N, R_max) int64 (0 first, -1 unused)."""

    def __init__(self, conditions: Sequence[str], logits: np.ndarray, offsets: np.ndarray) -> None:
        self.conditions = tuple(str(c) for c in conditions)
        self.logits = np.asarray(logits, dtype=np.float32)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        n = self.offsets.shape[0]
        if self.offsets.ndim != 2 or self.logits.shape[:3] != (
            n,
            len(self.conditions),
            self.offsets.shape[1] - 1,
        ):
            raise EvidenceError(
                f"rotated logits {self.logits.shape} and offsets {self.offsets.shape} do not "
                f"line up as (N, {len(self.conditions)}, R - 1, K) and (N, R)"
            )
        if (self.offsets[:, 0] != 0).any():
            raise EvidenceError("rotation offsets must start with rotation 0 (the given order)")

    def take(self, rows: np.ndarray) -> OrderLogits:
        return OrderLogits(self.conditions, self.logits[rows], self.offsets[rows])

    def restrict(self, conditions: Sequence[str]) -> OrderLogits:
        """Clean and the rotated conditions among ``conditions``."""
        keep = [i for i, c in enumerate(self.conditions) if c == spec.CLEAN or c in conditions]
        return OrderLogits([self.conditions[i] for i in keep], self.logits[:, keep], self.offsets)

    def stacked(self, conditions: Sequence[str]) -> np.ndarray:
        """(N, 1 + len(conditions), R - 1, K_max) in a grid's layout (clean first), NaN where a
        condition was not rotated."""
        n, _, r, k = self.logits.shape
        out = np.full((n, 1 + len(conditions), r, k), np.nan, dtype=np.float32)
        column = {c: i + 1 for i, c in enumerate(conditions)} | {spec.CLEAN: 0}
        for i, c in enumerate(self.conditions):
            if c in column:
                out[:, column[c]] = self.logits[:, i]
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "order_conditions": np.array(self.conditions, dtype=np.str_),
            "order_logits": self.logits,
            "order_offsets": self.offsets,
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> OrderLogits | None:
        if "order_logits" not in arrays:
            return None
        return cls(
            _as_str_tuple(arrays["order_conditions"]),
            arrays["order_logits"],
            arrays["order_offsets"],
        )


class GridEvidence(Evidence):
    """Option logits of a full corruption x severity grid plus the clean condition.

    ``logits`` (N, 1 + D*L, K_max) float32, NaN-padded, clean first, then (corruption,
    severity) in ``conditions`` order, which must form a full D x L grid. ``order``: the same
    samples under their other option rotations (:class:`OrderLogits`), None where the run scored
    none or the case gates no option-order figure.
    """

    kind = "grid"

    def __init__(
        self,
        ids: Sequence[str],
        answers: np.ndarray,
        n_options: np.ndarray,
        conditions: Sequence[str],
        logits: np.ndarray,
        reference: np.ndarray | None = None,
        order: OrderLogits | None = None,
    ) -> None:
        self.ids = tuple(str(i) for i in ids)
        self.answers = np.asarray(answers, dtype=np.int64)
        self.n_options = np.asarray(n_options, dtype=np.int64)
        self.conditions = tuple(conditions)
        self.logits = np.asarray(logits, dtype=np.float32)
        #: (N, 1 + D*L) bool: the baseline's correctness in the logits' layout, once this
        #: (current) side is paired with it (:meth:`paired_with`); the negative flip rates
        #: read it. None: unpaired (a baseline flips nothing against itself).
        self.reference = None if reference is None else np.asarray(reference, dtype=bool)
        n = len(self.ids)
        if len(set(self.ids)) != n:
            raise EvidenceError("sample ids repeat")
        if self.logits.ndim != 3 or self.logits.shape[:2] != (n, 1 + len(self.conditions)):
            raise EvidenceError(
                f"logits: expected ({n}, {1 + len(self.conditions)}, K), got {self.logits.shape}"
            )
        if self.answers.shape != (n,) or self.n_options.shape != (n,):
            raise EvidenceError(f"answers and n_options must be ({n},)")
        if self.reference is not None and self.reference.shape != self.logits.shape[:2]:
            raise EvidenceError(
                f"reference: expected {self.logits.shape[:2]}, got {self.reference.shape}"
            )
        self.order = order
        if order is not None:
            if order.offsets.shape[0] != n or order.logits.shape[-1] != self.logits.shape[-1]:
                raise EvidenceError(
                    f"rotated logits {order.logits.shape}: expected ({n}, C, R - 1, "
                    f"{self.logits.shape[-1]})"
                )
            foreign = [c for c in order.conditions if c != spec.CLEAN and c not in conditions]
            if foreign:
                raise EvidenceError(f"rotated conditions not in the grid: {foreign[:3]}")
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
        order: OrderLogits | None = None,
    ) -> GridEvidence:
        """From per-condition (N, K_max) logits; the conditions' order is kept."""
        keys = list(by_condition)
        logits = np.stack([clean, *(by_condition[k] for k in keys)], axis=1)
        return cls(ids, answers, n_options, keys, logits, order=order)

    def _replaced(self, **fields: Any) -> GridEvidence:
        kw = dict(ids=self.ids, answers=self.answers, n_options=self.n_options,
                  conditions=self.conditions, logits=self.logits, reference=self.reference,
                  order=self.order)  # fmt: skip
        return GridEvidence(**{**kw, **fields})  # type: ignore[arg-type]

    def without_order(self) -> GridEvidence:
        """This evidence without its rotations (a case that gates no option-order figure
        stores and resamples only what its figures read)."""
        return self if self.order is None else self._replaced(order=None)

    def restrict(self, conditions: Sequence[str]) -> GridEvidence:
        """The sub-grid of ``conditions`` (each must be here)."""
        index = {c: i + 1 for i, c in enumerate(self.conditions)}
        missing = [c for c in conditions if c not in index]
        if missing:
            raise EvidenceError(f"conditions not in this evidence: {missing[:3]}")
        cols = [0, *(index[c] for c in conditions)]
        ref = None if self.reference is None else self.reference[:, cols]
        order = None if self.order is None else self.order.restrict(conditions)
        return self._replaced(
            conditions=tuple(conditions), logits=self.logits[:, cols], reference=ref, order=order
        )

    def arrays(self) -> dict[str, np.ndarray]:
        out = {
            "kind": np.array(self.kind),
            "ids": np.array(self.ids, dtype=np.str_),
            "answers": self.answers,
            "n_options": self.n_options,
            "conditions": np.array(self.conditions, dtype=np.str_),
            "logits": self.logits,
        }
        if self.reference is not None:  # a paired side (never stored: a baseline has none)
            out["reference"] = self.reference
        if self.order is not None:
            out.update(self.order.arrays())
        return out

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> GridEvidence:
        try:
            return cls(
                _as_str_tuple(arrays["ids"]),
                arrays["answers"],
                arrays["n_options"],
                _as_str_tuple(arrays["conditions"]),
                arrays["logits"],
                arrays.get("reference"),
                OrderLogits.from_arrays(arrays),
            )
        except KeyError as exc:
            raise EvidenceError(f"grid evidence lacks array {exc}") from None

    def take(self, rows: np.ndarray, ids: Sequence[str] | None = None) -> GridEvidence:
        rows = np.asarray(rows)
        new_ids = [self.ids[i] for i in rows] if ids is None else list(ids)
        ref = None if self.reference is None else self.reference[rows]
        order = None if self.order is None else self.order.take(rows)
        return self._replaced(ids=new_ids, answers=self.answers[rows],
                              n_options=self.n_options[rows], logits=self.logits[rows],
                              reference=ref, order=order)  # fmt: skip

    # -- figures ----------------------------------------------------------------------------
    @cached_property
    def grid(self) -> GridMetrics:
        clean, cube = split_conditions(self.logits, len(self.severities))
        require_answered(clean, cube, self.n_options, self.ids, self.corruptions, self.severities)
        return grid_from_logits(
            self.logits,
            self.answers,
            self.n_options,
            n_severities=len(self.severities),
            corruptions=self.corruptions,
            reference=self.reference,
            rotated=None
            if self.order is None
            else (self.order.stacked(self.conditions), self.order.offsets),
        )

    @property
    def correctness(self) -> np.ndarray:
        """(N, 1 + D*L) bool: each condition's answer correct, in the logits' layout (what a
        candidate paired with this side reads as its :attr:`reference`)."""
        g = self.grid
        n = len(self.ids)
        return np.concatenate([g.correct_clean[:, None], g.correct.reshape(n, -1)], axis=1)

    def with_reference(self, reference: np.ndarray | None) -> GridEvidence:
        """This evidence paired with a baseline's :attr:`correctness` (same rows and layout)."""
        return self._replaced(reference=reference)

    def paired_with(self, baseline: Evidence) -> tuple[GridEvidence, str | None]:
        """This (current) side carrying the baseline's correctness, aligned to its ids and
        conditions, so the negative flip rates count the baseline's right answers it lost."""
        assert isinstance(baseline, GridEvidence)
        return self.with_reference(baseline.correctness), None

    def figures(self) -> dict[str, float]:
        return self.grid.model_figures()

    def replicates(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        return evaluate("grid", self.grid, np.asarray(counts, dtype=np.float64))

    def per_sample(self, name: str) -> np.ndarray | None:
        return per_sample("grid", self.grid, name)

    def benign(self, seed: int) -> GridEvidence:
        rng = np.random.default_rng([seed, 0xBE9])
        noise = rng.normal(0.0, BENIGN_LOGIT_SD, size=self.logits.shape).astype(np.float32)
        # paired with this side, as a candidate is: its negative flips are benign ones
        ref = self.correctness if self.reference is None else self.reference
        order = self.order
        if order is not None:  # drawn after the grid's: its noise is the same with or without
            extra = rng.normal(0.0, BENIGN_LOGIT_SD, size=order.logits.shape).astype(np.float32)
            order = OrderLogits(order.conditions, order.logits + extra, order.offsets)
        return self._replaced(logits=self.logits + noise, reference=ref, order=order)


#: Current VSI evidence re-probed on a baseline's pool, by (current, baseline, features)
#: digest: the VSI cases of one run (one per gated figure) refit the probes once.
_PAIRED: OrderedDict[tuple, VSIEvidence] = OrderedDict()
_PAIRED_SIZE = 8


class VSIEvidence(Evidence):
    """Per-sample VSI (N,), argmax change under the region blur (N,), the low-VSI ``pool`` and
    its matched high-VSI ``control`` (N,) bool, and the held-out probe correctness (N,) of the
    probe fitted on each (NaN elsewhere; :func:`benchc.metrics.vsi.pool_probe`).

    The pool is fixed by the baseline (docs/spec.md §5): before a gate compares, the current
    run is re-probed on the baseline's pool with its own tower's ``features`` (kept in memory,
    never stored; :meth:`paired_with`).
    """

    kind = "vsi"

    def __init__(
        self,
        ids: Sequence[str],
        vsi: np.ndarray,
        changed: np.ndarray,
        probe_correct: np.ndarray,
        pool: np.ndarray | None = None,
        control: np.ndarray | None = None,
        *,
        features: tuple[np.ndarray, np.ndarray] | None = None,
        probes: tuple[ProbeResult | None, ProbeResult | None] = (None, None),
        groups: np.ndarray | None = None,
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
        self.pool = low_pool(self.vsi) if pool is None else np.asarray(pool, dtype=bool)
        self.control = (
            matched_control(self.vsi, self.pool) if control is None else np.asarray(control, bool)
        )
        for name in ("pool", "control"):
            if getattr(self, name).shape != (n,):
                raise EvidenceError(f"{name} must be ({n},), got {getattr(self, name).shape}")
        if (self.pool & self.control).any():
            raise EvidenceError("the low-VSI pool and the high-VSI control overlap")
        self.features = features
        #: The fitted probes (pool, control), for their fold std; in memory only.
        self.probes = probes
        #: The image behind each row (rows repeat in a bootstrap resample): the probe's folds
        #: group by it, so a copy of a training image never sits in the test fold.
        self.groups = np.arange(n) if groups is None else np.asarray(groups)

    @classmethod
    def from_run(
        cls,
        arrays: Mapping[str, np.ndarray],
        ids: Sequence[str],
        *,
        support: str = spec.VSI_SUPPORT,
        pool: np.ndarray | None = None,
    ) -> VSIEvidence:
        """From a run's stored VSI arrays: VSI on ``support`` (:func:`vsi_values`), argmax
        change under the region blur, and the probes fitted on the low-VSI ``pool`` (default:
        this run's own) and its matched control. No tower, or too few images for five grouped
        folds: the probe, and so the gap, is undefined (NaN)."""
        vsi = vsi_values(arrays, support)
        changed = arrays["top1_clean"] != arrays["top1_blur"]
        feats = None
        if "features_clean" in arrays and "features_blur" in arrays:
            feats = (arrays["features_clean"], arrays["features_blur"])
        return cls(ids, vsi, changed, np.full(len(ids), np.nan), pool, features=feats).probed()

    def probed(
        self, pool: np.ndarray | None = None, control: np.ndarray | None = None
    ) -> VSIEvidence:
        """This evidence with its probes refitted on ``pool`` (default: its own) and
        ``control`` (default: that pool's matched control), from its features; without
        features only the masks change."""
        pool = self.pool if pool is None else np.asarray(pool, dtype=bool)
        control = matched_control(self.vsi, pool) if control is None else control
        if self.features is None:
            return self.replaced(pool=pool, control=control)
        fc, fb = self.features
        probe, on_pool = pool_probe(fc, fb, pool, image_ids=self.groups)
        control_probe, on_control = pool_probe(fc, fb, control, image_ids=self.groups)
        correct = np.where(pool, on_pool, np.where(control, on_control, np.nan))
        return self.replaced(
            probe_correct=correct, pool=pool, control=control, probes=(probe, control_probe)
        )

    def replaced(self, **fields: object) -> VSIEvidence:
        """A copy with some of the constructor's fields replaced (the rest kept: pool,
        features, groups...), as a model variant that changes only its outputs."""
        kw = dict(
            ids=self.ids, vsi=self.vsi, changed=self.changed, probe_correct=self.probe_correct,
            pool=self.pool, control=self.control, features=self.features, probes=self.probes,
            groups=self.groups,
        )  # fmt: skip
        unknown = set(fields) - set(kw)
        if unknown:
            raise TypeError(f"VSIEvidence has no field {sorted(unknown)[0]!r}")
        return VSIEvidence(**{**kw, **fields})  # type: ignore[arg-type]

    def paired_with(self, baseline: Evidence) -> tuple[VSIEvidence, str | None]:
        """This (current) evidence, aligned to ``baseline``, read on the baseline's pool and
        control: re-probed on them when they differ from its own (docs/spec.md §5)."""
        assert isinstance(baseline, VSIEvidence)
        if np.array_equal(self.pool, baseline.pool) and np.array_equal(
            self.control, baseline.control
        ):
            return self, None
        feats = None if self.features is None else digest_arrays(dict(enumerate(self.features)))
        key = (self.digest, baseline.digest, feats)
        out = _PAIRED.get(key)
        if out is None:  # every VSI case of one run pairs the same two sides: fit once
            out = _PAIRED[key] = self.probed(baseline.pool, baseline.control)
            while len(_PAIRED) > _PAIRED_SIZE:
                _PAIRED.popitem(last=False)
        if self.features is None:
            return out, "read on the baseline's low-VSI pool with the run's stored probe results"
        return out, f"re-probed on the baseline's low-VSI pool (n={int(baseline.pool.sum())})"

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "kind": np.array(self.kind),
            "ids": np.array(self.ids, dtype=np.str_),
            "vsi": self.vsi,
            "changed": self.changed,
            "probe_correct": self.probe_correct,
            "pool": self.pool,
            "control": self.control,
        }

    @classmethod
    def _from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> VSIEvidence:
        try:
            return cls(
                _as_str_tuple(arrays["ids"]),
                arrays["vsi"],
                arrays["changed"],
                arrays["probe_correct"],
                arrays.get("pool"),
                arrays.get("control"),
            )
        except KeyError as exc:
            raise EvidenceError(f"VSI evidence lacks array {exc}") from None

    def take(self, rows: np.ndarray, ids: Sequence[str] | None = None) -> VSIEvidence:
        rows = np.asarray(rows)
        new_ids = [self.ids[i] for i in rows] if ids is None else list(ids)
        feats = None if self.features is None else tuple(f[rows] for f in self.features)
        return VSIEvidence(
            new_ids, self.vsi[rows], self.changed[rows], self.probe_correct[rows],
            self.pool[rows], self.control[rows], features=feats, probes=self.probes,
            groups=self.groups[rows],
        )  # fmt: skip

    @property
    def low(self) -> np.ndarray:
        """This run's own insensitive samples (the insensitive fraction's; not the pool)."""
        return low_pool(self.vsi)

    def figures(self) -> dict[str, float]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return {k: float(v) for k, v in evaluate("vsi", self).items()}

    def replicates(self, counts: np.ndarray) -> dict[str, np.ndarray]:
        return evaluate("vsi", self, np.asarray(counts, dtype=np.float64))

    def per_sample(self, name: str) -> np.ndarray | None:
        return per_sample("vsi", self, name)

    def benign(self, seed: int) -> VSIEvidence:
        """VSI jittered (the insensitive fraction moves); the pool, being the baseline's,
        stays fixed, as do argmax change and probe correctness."""
        rng = np.random.default_rng([seed, 0x751])
        factor = np.exp(rng.normal(0.0, BENIGN_VSI_LOG_SD, size=self.vsi.shape))
        return self.replaced(vsi=self.vsi * factor)


def vsi_values(arrays: Mapping[str, np.ndarray], support: str = spec.VSI_SUPPORT) -> np.ndarray:
    """The per-sample VSI on ``support`` (docs/spec.md §5): ``top50`` reads ``vsi_top50``,
    ``full`` the full-vocabulary ``vsi``. A run that has only a top-k variant (a server) gives
    that for either; asking for ``full`` of it says so in the run's ``vsi_variant``."""
    if support not in spec.VSI_SUPPORTS:
        raise ValueError(f"VSI support {support!r}: expected one of {spec.VSI_SUPPORTS}")
    if support == "top50" and "vsi_top50" in arrays:
        return np.asarray(arrays["vsi_top50"], dtype=np.float64)
    return np.asarray(arrays["vsi"], dtype=np.float64)


def order_logits(
    by_condition: Mapping[str, Mapping[str, np.ndarray]], wanted: Sequence[str] | None = None
) -> OrderLogits | None:
    """The rotated conditions' stored arrays (``order.<condition>``: ``option_logits``,
    ``offsets``) as one :class:`OrderLogits` (``wanted``: only those, in that order); None when
    none is there. Every condition of a sample has the same rotations (docs/spec.md §1)."""
    keys = [k for k in (by_condition if wanted is None else wanted) if k in by_condition]
    if not keys:
        return None
    offsets = np.asarray(by_condition[keys[0]]["offsets"])
    for k in keys[1:]:
        if not np.array_equal(by_condition[k]["offsets"], offsets):
            raise EvidenceError(f"rotations of {k} differ from those of {keys[0]}")
    logits = np.stack([by_condition[k]["option_logits"] for k in keys], axis=1)
    return OrderLogits(keys, logits, offsets)


def stored_grid(run: Any) -> GridEvidence | None:
    """The full corruption x severity grid a stored run holds, as gate evidence (None: no
    complete grid); ``run`` is a :class:`benchc.results.reader.StoredRun`."""
    if run.logits is None or run.clean_logits is None:
        return None
    n_sev = len(run.severities)
    return GridEvidence.from_conditions(
        run.ids,
        run.answers,
        run.n_options,
        run.clean_logits,
        {key: run.logits[:, i // n_sev, i % n_sev] for i, key in enumerate(run.cells)},
        order_logits(getattr(run, "order", {}) or {}),
    )
