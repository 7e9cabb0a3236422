"""The mutant zoo and the benign zoo: known-worse and known-equivalent models for testing gates.

A gate is only worth its verdict if it fails for a structural regression and stays green for a
benign change. Both claims need models whose change is known, without training new
checkpoints. Three kinds live here:

* **Backend wrappers** (model-level, run through the real suite):
  :class:`~benchc.testing.degrade.DegradedBackend` (shipped: the hidden ``--benchc-degrade``
  selects it); :func:`vision_ignoring` (a forward hook scales the projector's output for the
  image tokens, so the vision tower still sees what the language model ignores);
  :func:`weight_noise` (benign: tiny relative noise on every weight).
* **Output mutants** (:data:`GRID_MUTANTS`, :data:`VSI_MUTANTS`): rewrite a model's stored
  per-sample evidence the way a regressed model would have produced it. The structural ones keep
  every prediction, so accuracy cannot see them.
* **Benign variants** are settings of the real backend (bfloat16, another batch size) plus
  :func:`weight_noise`; ``benchmarks/gate_power.py`` runs them all through the gates.

Every mutant takes a ``strength``; :data:`MEANINGFUL` names the strength the power table in
docs/measurements.md calls a meaningful regression.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from benchc import spec
from benchc.gates.evidence import GridEvidence, VSIEvidence
from benchc.models.base import Backend
from benchc.testing.dev.checkpoints import projector


# -- backend wrappers ----------------------------------------------------------------------------
def _projector(model: object) -> object:
    return projector(model)


def vision_ignoring(backend: Backend, scale: float) -> Backend:
    """A vision-ignoring language model (mutant): the projector's output, the image tokens the
    language model reads, is multiplied by ``scale`` through a forward hook. The tower and its
    pooled features (the gap's probe) are untouched, so the tower still separates a blurred view
    while the answers stop reacting to it. Mutates ``backend`` in place and returns it."""
    if not 0.0 <= scale <= 1.0:
        raise ValueError(f"vision_ignoring: scale must be in [0, 1], got {scale}")
    module = _projector(backend.model)  # type: ignore[attr-defined]
    module.register_forward_hook(lambda _m, _i, out: out * scale)  # type: ignore[attr-defined]
    backend.fingerprint = f"{backend.fingerprint}+vision_ignoring({scale:g})"
    return backend


def weight_noise(backend: Backend, rel_sd: float, seed: int = 0) -> Backend:
    """Benign: every floating weight tensor gets Gaussian noise of ``rel_sd`` x its own SD
    (what a re-quantisation or another kernel's rounding does). Mutates ``backend`` in place."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in backend.model.parameters():  # type: ignore[attr-defined]
            if p.is_floating_point() and p.numel() > 1:
                noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
                p.add_((noise * p.float().std() * rel_sd).to(p.dtype))
    backend.fingerprint = f"{backend.fingerprint}+weight_noise({rel_sd:g},{seed})"
    return backend


# -- output mutants ------------------------------------------------------------------------------
def _corrupted(ev: GridEvidence) -> np.ndarray:
    """(1 + C,) bool: the corrupted conditions of ``ev.logits``' condition axis."""
    return np.r_[False, np.ones(len(ev.conditions), bool)]


def _with_logits(ev: GridEvidence, logits: np.ndarray) -> GridEvidence:
    """``ev`` with new given-order logits; its rotations, where it has them, kept."""
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, logits, order=ev.order)


def content_rotations(ev: GridEvidence, sd: float = 0.0, seed: int = 0) -> GridEvidence:
    """``ev`` with the rotations a model that reads only the content would give: under rotation
    r, position j shows content (j + r) mod K and gets that content's given-order logit (plus
    N(0, ``sd``) noise), on :func:`benchc.spec.order_conditions` of its grid."""
    from benchc.data.rotations import n_rotations, rotations
    from benchc.gates.evidence import OrderLogits

    keys = spec.order_conditions(ev.conditions)
    cols = [0 if k == spec.CLEAN else 1 + ev.conditions.index(k) for k in keys]
    n, _, k_max = ev.logits.shape
    r_max = n_rotations(int(ev.n_options.max()))
    offsets = np.full((n, r_max), -1, dtype=np.int64)
    out = np.full((n, len(keys), r_max - 1, k_max), np.nan, dtype=np.float32)
    for i, (sid, k) in enumerate(zip(ev.ids, ev.n_options, strict=True)):
        plan = rotations(int(k), sid)
        offsets[i, : len(plan)] = plan
        for slot, r in enumerate(plan[1:]):
            order = (np.arange(k) + r) % k
            out[i, :, slot, :k] = ev.logits[i, cols][:, order]
    if sd:
        out += np.random.default_rng([seed, 0x0D]).normal(0, sd, out.shape).astype(np.float32)
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, ev.logits,
                        ev.reference, OrderLogits(keys, out, offsets))  # fmt: skip


def position_bias(ev: GridEvidence, strength: float, position: int = 0) -> GridEvidence:
    """A bias towards one letter: ``strength`` added to the logit at ``position`` (A) in
    every order, the given one included, on every condition (a checkpoint that learned
    "answer A when unsure": accuracy moves little on a shuffled testbed, circular accuracy
    and position preference do)."""
    x = ev.logits.copy()
    x[:, :, position] += strength
    order = ev.order
    if order is not None:
        from benchc.gates.evidence import OrderLogits

        rotated = order.logits.copy()
        rotated[..., position] += strength
        order = OrderLogits(order.conditions, rotated, order.offsets)
    return GridEvidence(ev.ids, ev.answers, ev.n_options, ev.conditions, x, ev.reference, order)


def _scale_corrupted(ev: GridEvidence, factor: float, where: np.ndarray | None = None):
    """Option logits of corrupted pairs times ``factor`` (about each pair's mean logit, so the
    argmax and the ranking of options are kept)."""
    x = ev.logits.astype(np.float64)
    mean = np.nanmean(x, axis=2, keepdims=True)
    scaled = mean + (x - mean) * factor
    mask = np.broadcast_to(_corrupted(ev)[None, :, None], x.shape)
    if where is not None:
        mask = mask & where[..., None]
    return _with_logits(ev, np.where(mask, scaled, x).astype(np.float32))


def overconfident_under_corruption(ev: GridEvidence, strength: float) -> GridEvidence:
    """Corrupted logits sharpened by ``1 + strength``: every prediction kept, confidence up."""
    return _scale_corrupted(ev, 1.0 + strength)


def underconfident_under_corruption(ev: GridEvidence, strength: float) -> GridEvidence:
    """Corrupted logits flattened by ``1 / (1 + strength)``: every prediction kept, the model
    hedges under corruption (Bench-C's Mixed-cell signature: R_c down, R_w up)."""
    return _scale_corrupted(ev, 1.0 / (1.0 + strength))


def confident_when_wrong(ev: GridEvidence, strength: float) -> GridEvidence:
    """Corrupted pairs whose prediction is wrong get sharper by ``1 + strength``: every
    prediction kept, confidence grows exactly where it should not."""
    pred = np.nanargmax(np.where(np.isnan(ev.logits), -np.inf, ev.logits), axis=2)
    wrong = pred != ev.answers[:, None]
    return _scale_corrupted(ev, 1.0 + strength, where=wrong)


def family_fragility(ev: GridEvidence, strength: float, family: str = "blur") -> GridEvidence:
    """One corruption family's right-answer logit lowered by ``strength x severity / 5``:
    a regression confined to that family, growing with severity."""
    x = ev.logits.copy()
    members = spec.FAMILIES[family]
    for j, key in enumerate(ev.conditions, start=1):
        corruption, severity = spec.parse_condition(key)
        if corruption in members:
            x[np.arange(len(ev.ids)), j, ev.answers] -= strength * severity / 5.0
    return _with_logits(ev, x)


def vision_ignoring_vsi(ev: VSIEvidence, strength: float, seed: int = 0) -> VSIEvidence:
    """Output form of :func:`vision_ignoring` for the VSI gates: on a ``strength`` share of the
    samples the answer stops reacting to the blur (VSI x 1e-3, argmax unchanged) while the tower
    still separates the views (probe correctness kept). The pool stays the baseline's
    (docs/spec.md §5), so the gap reads the hit pool samples whose answer stopped moving."""
    hit = np.random.default_rng([seed, 0x16]).random(len(ev.ids)) < strength
    return ev.replaced(
        vsi=np.where(hit, ev.vsi * 1e-3, ev.vsi), changed=np.where(hit, 0.0, ev.changed)
    )


def argmax_frozen_vsi(ev: VSIEvidence, strength: float, seed: int = 0) -> VSIEvidence:
    """The encoder-LLM disconnect deepens where it already is: on the low-VSI samples whose
    answer still moved under the blur, a ``strength`` share stop moving (argmax change -> 0)
    while the tower separates the views as before. VSI is kept, so the gap's subset is too."""
    rng = np.random.default_rng([seed, 0xF0])
    hit = ev.pool & (ev.changed > 0) & (rng.random(len(ev.ids)) < strength)
    return ev.replaced(changed=np.where(hit, 0.0, ev.changed))


@dataclass(frozen=True)
class Mutant:
    """A named output mutant, its strengths, whether it keeps every prediction, and the
    strength documented as a meaningful regression."""

    name: str
    fn: Callable
    strengths: tuple[float, ...]
    meaningful: float
    keeps_predictions: bool
    #: The gate this mutant is aimed at (``level:figure``, family gates ``family:<name>:fig``).
    target: str


GRID_MUTANTS: tuple[Mutant, ...] = (
    Mutant("overconfident_under_corruption", overconfident_under_corruption, (0.25, 0.5, 1.0),
           0.5, True, "model:r_w"),
    Mutant("underconfident_under_corruption", underconfident_under_corruption,
           (0.25, 0.5, 1.0, 3.0), 0.5, True, "model:mixed_cell_rate"),
    Mutant("confident_when_wrong", confident_when_wrong, (0.25, 0.5, 1.0), 0.5, True,
           "model:ras"),
    Mutant("family_fragility", family_fragility, (0.5, 1.0, 2.0), 1.0, False,
           "family:blur:accuracy"),
    Mutant("position_bias", position_bias, (0.25, 0.5, 1.0), 0.5, False,
           "model:position_preference"),
)  # fmt: skip
VSI_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "vision_ignoring_vsi",
        vision_ignoring_vsi,
        (0.1, 0.25, 0.5),
        0.25,
        False,
        "vsi:insensitive_fraction",
    ),
    Mutant("argmax_frozen_vsi", argmax_frozen_vsi, (0.5, 1.0), 1.0, False, "vsi:gap"),
)
