"""Pooled final-layer vision-tower features for the encoder probe (docs/spec.md §5).

The pool is the mean of the tower's final-layer patch tokens. A CLS token is dropped: LLaVA's
"default" feature strategy never feeds it to the LM, so it (and the pooler) stay untrained.
The tower is run through the model's own ``get_image_features`` (or, for families without one,
the tower itself) with a forward hook on the tower, so each family's preprocessing quirks (crops,
padding images, grids, tiles) are handled by transformers.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

#: Attribute names under which VLM families keep their vision tower.
TOWER_ATTRS = ("vision_tower", "vision_model", "visual", "vision_encoder")


def find_vision_tower(model: torch.nn.Module) -> torch.nn.Module:
    """The vision tower module of a VLM (searched on the model and its inner ``.model``)."""
    for owner in (model, getattr(model, "model", None)):
        if owner is None:
            continue
        for attr in TOWER_ATTRS:
            tower = getattr(owner, attr, None)
            if isinstance(tower, torch.nn.Module):
                return tower
    raise ValueError(
        f"{type(model).__name__} has no vision tower under any of {', '.join(TOWER_ATTRS)}"
    )


#: Names under which towers keep a learned class token prepended to the patch tokens
#: (CLIP / Mllama: ``class_embedding``; InternViT: ``cls_token``).
CLS_ATTRS = ("class_embedding", "cls_token")


def has_cls_token(tower: torch.nn.Module) -> bool:
    """Whether the tower prepends a learned class token to the patch tokens."""
    embeddings = getattr(tower, "embeddings", None)
    if embeddings is None:
        inner = getattr(tower, "vision_model", None)
        embeddings = getattr(inner, "embeddings", None)
    owners = (embeddings, tower)  # Mllama keeps class_embedding on the tower itself
    return any(getattr(o, a, None) is not None for o in owners for a in CLS_ATTRS)


def _run_tower(model: torch.nn.Module, tower: torch.nn.Module, image_inputs: dict) -> None:
    """Run the tower the way the model does: through ``get_image_features`` when the model has
    one (crops, grids and padding handled by transformers), else the tower itself with the
    inputs its ``forward`` accepts (Mllama: ``pixel_values``, ``aspect_ratio_ids``/``_mask``)."""
    getter = getattr(model, "get_image_features", None)
    if getter is not None:
        getter(**image_inputs)
        return
    accepted = inspect.signature(tower.forward).parameters
    tower(**{k: v for k, v in image_inputs.items() if k in accepted})


def pooled_vision_features(
    model: torch.nn.Module, image_inputs: dict[str, Any], n_images: int
) -> torch.Tensor:
    """(n_images, D) mean of final-layer patch tokens, one image per query.

    Handles towers returning (n_images, T, D), several crops per image (Idefics3-style 5-D
    ``pixel_values`` with all-zero padding crops), and flat (sum of patches, D) outputs with an
    ``image_grid_thw`` (Qwen-VL-style).
    """
    tower = find_vision_tower(model)
    with TowerOutput(model) as seen:
        _run_tower(model, tower, image_inputs)
    return pool_tower_output(tower, seen.output(), image_inputs, n_images)


class TowerOutput:
    """The vision tower's output during a ``with`` block (a forward hook): the scoring pass that
    already runs the tower hands its features to the gap probe, instead of a second encoding
    of the same images (``HFBackend.forward(features=True)``)."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.model = model
        self.tower = find_vision_tower(model)
        self._captured: list[Any] = []
        self._handle: Any = None

    def __enter__(self) -> TowerOutput:
        self._handle = self.tower.register_forward_hook(
            lambda _m, _i, out: self._captured.append(out)
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()

    def ran(self) -> bool:
        """Whether the tower ran in the block."""
        return bool(self._captured)

    def output(self) -> Any:
        """The tower's last output in the block."""
        if not self._captured:
            raise ValueError(f"{type(self.model).__name__} never ran its vision tower")
        return self._captured[-1]


def pool_tower_output(
    tower: torch.nn.Module, out: Any, image_inputs: dict[str, Any], n_images: int
) -> torch.Tensor:
    """(n_images, D) mean of final-layer patch tokens of the tower's output ``out`` for
    ``image_inputs`` (see :func:`pooled_vision_features`)."""
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    if hidden.dim() == 5 and "aspect_ratio_mask" in image_inputs:
        # Mllama: (B, images, tiles, 1 + patches, D x (1 + intermediate layers)); the final
        # layer is the first D channels, the class token comes first, padding tiles are masked.
        width = getattr(getattr(tower, "config", None), "hidden_size", hidden.shape[-1])
        tokens = hidden[..., 1:, :width].float()
        mask = image_inputs["aspect_ratio_mask"].to(tokens.device, tokens.dtype)
        weights = mask[..., None, None].expand(*tokens.shape[:-1], 1)
        pooled = (tokens * weights).sum(dim=(2, 3)) / weights.sum(dim=(2, 3))
        if pooled.shape[0] == n_images and pooled.shape[1] == 1:
            return pooled[:, 0]
    if hidden.dim() == 3:
        if has_cls_token(tower):
            hidden = hidden[:, 1:]
        per_crop = hidden.float().mean(dim=1)
        if per_crop.shape[0] == n_images:
            return per_crop
        num_patches = image_inputs.get("num_patches")
        if num_patches is not None and int(num_patches.sum()) == per_crop.shape[0]:
            # InternVL / GotOcr2: flat crops (sum of crops, C, H, W), crops per image given.
            groups = torch.split(hidden.float(), num_patches.tolist())
            return torch.stack([g.reshape(-1, g.shape[-1]).mean(0) for g in groups])
        pixel_values = image_inputs.get("pixel_values")
        if pixel_values is not None and pixel_values.dim() == 5:
            real = (pixel_values != 0).flatten(2).any(-1)  # (n_images, crops)
            counts = real.sum(1).tolist()
            if sum(counts) == per_crop.shape[0]:
                groups = torch.split(hidden.float(), counts)
                return torch.stack([g.reshape(-1, g.shape[-1]).mean(0) for g in groups])
    elif hidden.dim() == 2 and "image_grid_thw" in image_inputs:
        counts = image_inputs["image_grid_thw"].prod(-1).tolist()
        if sum(counts) == hidden.shape[0]:
            return torch.stack([g.float().mean(0) for g in torch.split(hidden, counts)])
    raise ValueError(
        f"cannot map {type(tower).__name__} output of shape {tuple(hidden.shape)} to "
        f"{n_images} images"
    )
