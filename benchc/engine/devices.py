"""The device class: what besides the run key decides a chunk's bits.

Kernels differ between GPU generations, CUDA releases and attention implementations (and on a
CPU between instruction sets and thread counts), so two replicas agree bit for bit only within
one device class. A distributed run refuses actors that disagree and puts the class into its
run key, so results of different hardware never mix silently in one store.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping, Sequence
from typing import Any

from benchc.engine import EngineError


class DeviceMismatch(EngineError):
    """Actors of one run report different device classes or run keys."""


def device_class(backend: Any) -> dict[str, str]:
    """This process's class for ``backend``: GPU name, CUDA, compute capability and attention
    implementation on CUDA; ``cpu`` with torch, its instruction set, threads and the machine
    on a CPU; ``server`` (the model runs behind its URLs) for a black-box backend."""
    inner = getattr(backend, "inner", backend)  # a wrapper (--benchc-degrade): its model
    device = getattr(inner, "device", None)
    if device is None:
        return {"kind": "server"}
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(index)
        return {
            "kind": "cuda",
            "gpu": props.name,
            "cuda": str(torch.version.cuda),
            "capability": f"{props.major}.{props.minor}",
            "attention": str(getattr(inner, "attention", None) or "default"),
            "torch": torch.__version__,
        }
    return {
        "kind": device.type,
        "torch": torch.__version__,
        "isa": torch.backends.cpu.get_cpu_capability(),
        "threads": str(torch.get_num_threads()),
        "machine": platform.machine(),
    }


def describe(cls: Mapping[str, str]) -> str:
    """One canonical line (what enters the run key): ``cuda NVIDIA H200 cuda=12.8 ...``."""
    head = cls.get("kind", "?")
    rest = " ".join(f"{k}={v}" for k, v in sorted(cls.items()) if k != "kind")
    return f"{head} {rest}".strip()


def agreed(reports: Sequence[Mapping[str, Any]], field: str, what: str) -> Any:
    """The one value of ``report[field]`` all actors share; :class:`DeviceMismatch` naming the
    actors that differ otherwise (``what`` names the field in the message)."""
    if not reports:
        raise DeviceMismatch("no actor reported")
    first = reports[0][field]
    odd = [i for i, r in enumerate(reports) if r[field] != first]
    if odd:
        raise DeviceMismatch(
            f"actors disagree on the {what}: actor 0 has {_short(first)}, actor {odd[0]} has "
            f"{_short(reports[odd[0]][field])}; one run needs one kind of device (start actors "
            "on alike nodes, or run each kind as its own run)"
        )
    return first


def _short(value: Any) -> str:
    return describe(value) if isinstance(value, Mapping) and "kind" in value else repr(value)
