"""Where numbers were computed: the library versions and the device behind a run or a baseline.

Why: a torch or transformers upgrade can move option logits by more than a gate's floor, so
stored outputs are keyed by :func:`numeric_versions` (an upgrade recomputes instead of reusing)
and every manifest and baseline records :func:`environment`; a baseline recorded elsewhere is
named in one line (:func:`differences`), never silently compared.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Mapping
from typing import Any

#: Libraries whose release can change a stored number (the store keys outputs by them).
NUMERIC_LIBRARIES: tuple[str, ...] = ("torch", "transformers")
#: Every field :func:`environment` records, in the order :func:`differences` names them.
FIELDS: tuple[str, ...] = ("benchc", "torch", "transformers", "device", "dtype")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def numeric_versions() -> dict[str, str | None]:
    """``{"torch": ..., "transformers": ...}``: the releases a run's outputs depend on."""
    return {name: _version(name) for name in NUMERIC_LIBRARIES}


def device_name(device: str | None) -> str:
    """A human name of ``device``: the GPU's model for ``cuda[:i]``, else the CPU's."""
    device = str(device or "cpu")
    if device.startswith("cuda"):
        try:
            import torch

            index = int(device.partition(":")[2] or 0)
            return f"{device} ({torch.cuda.get_device_name(index)})"
        except Exception:  # no CUDA here: keep what was asked for
            return device
    return f"cpu ({platform.machine() or 'unknown'})"


def environment(backend: Any = None) -> dict[str, str | None]:
    """benchc, torch and transformers versions, the device and the dtype of ``backend`` (None
    where a backend has none, e.g. a server)."""
    from benchc import __version__

    recorded = getattr(backend, "recorded_environment", None)
    if recorded:  # results computed elsewhere (benchc.engine.stored.StandIn): theirs
        return dict(recorded)
    backend = getattr(backend, "inner", backend)  # a wrapper (--benchc-degrade): its model
    device = getattr(backend, "device", None)
    dtype = getattr(backend, "dtype", None)
    return {
        "benchc": __version__,
        **numeric_versions(),
        "device": device_name(str(device)) if device is not None else None,
        "dtype": str(dtype).removeprefix("torch.") if dtype is not None else None,
    }


def differences(recorded: Mapping[str, Any] | None, current: Mapping[str, Any]) -> list[str]:
    """``"torch 2.12.0 -> 2.13.0"`` for every recorded field that differs (none recorded: [])."""
    if not recorded:
        return []
    return [
        f"{k} {recorded.get(k)} -> {current.get(k)}"
        for k in FIELDS
        if k in recorded and recorded.get(k) != current.get(k)
    ]


__all__ = ["FIELDS", "differences", "environment", "numeric_versions"]
