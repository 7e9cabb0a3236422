"""Pooled final-layer vision-tower features for the encoder probe (SPEC section 5).

The pool is the mean of the tower's final-layer patch tokens. A CLS token is dropped: LLaVA's
"default" feature strategy never feeds it to the LM, so it (and the pooler) stay untrained.
The tower is run through the model's own ``get_image_features`` with a forward hook on the tower,
so each family's preprocessing quirks (crops, padding images, grids) are handled by transformers.
"""

from __future__ import annotations

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


def has_cls_token(tower: torch.nn.Module) -> bool:
    """CLIP-style towers prepend a learned class embedding to the patch tokens."""
    embeddings = getattr(tower, "embeddings", None)
    if embeddings is None:
        inner = getattr(tower, "vision_model", None)
        embeddings = getattr(inner, "embeddings", None)
    return getattr(embeddings, "class_embedding", None) is not None


def pooled_vision_features(
    model: torch.nn.Module, image_inputs: dict[str, Any], n_images: int
) -> torch.Tensor:
    """(n_images, D) mean of final-layer patch tokens, one image per query.

    Handles towers returning (n_images, T, D), several crops per image (Idefics3-style 5-D
    ``pixel_values`` with all-zero padding crops), and flat (sum of patches, D) outputs with an
    ``image_grid_thw`` (Qwen-VL-style).
    """
    tower = find_vision_tower(model)
    captured: list[Any] = []
    handle = tower.register_forward_hook(lambda _m, _i, out: captured.append(out))
    try:
        getter = getattr(model, "get_image_features", None)
        if getter is None:
            raise ValueError(f"{type(model).__name__} has no get_image_features()")
        getter(**image_inputs)
    finally:
        handle.remove()
    if not captured:
        raise ValueError(f"{type(model).__name__}.get_image_features() never ran its vision tower")
    out = captured[-1]
    hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
    if hidden.dim() == 3:
        if has_cls_token(tower):
            hidden = hidden[:, 1:]
        per_crop = hidden.float().mean(dim=1)
        if per_crop.shape[0] == n_images:
            return per_crop
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
