"""Where numbers were computed: the library versions and the device behind a run or a baseline.

Why: a torch or transformers upgrade can move option logits by more than a gate's floor, so
stored outputs are keyed by :func:`numeric_versions` (an upgrade recomputes instead of reusing)
and every manifest and baseline records :func:`environment`; a baseline recorded elsewhere is
named in one line (:func:`differences`), never silently compared.
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Mapping, Sequence
from typing import Any

#: Libraries whose release can change a stored number (the store keys outputs by them).
NUMERIC_LIBRARIES: tuple[str, ...] = ("torch", "transformers")
#: Every field :func:`environment` records, in the order :func:`differences` names them.
FIELDS: tuple[str, ...] = ("benchc", "torch", "transformers", "device", "dtype")


def installed_version(dist: str) -> str | None:
    """The installed release of distribution ``dist``; None when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def sklearn_version() -> str | None:
    """The scikit-learn release (it splits the VSI probe's folds), read from the installed
    distribution: importing ``sklearn`` for its ``__version__`` costs a run's start 0.3 s."""
    return installed_version("scikit-learn")


def numeric_versions() -> dict[str, str | None]:
    """``{"torch": ..., "transformers": ...}``: the releases a run's outputs depend on."""
    return {name: installed_version(name) for name in NUMERIC_LIBRARIES}


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


def git_commit() -> str | None:
    """The commit of the benchc checkout this code runs from (``+dirty`` with uncommitted
    changes); None for an installed wheel or without git."""
    import subprocess
    from pathlib import Path

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=5, check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def command_line(args: Sequence[str] | None = None) -> str:
    """The full command line as typed (interpreter and ``-m`` included); ``args``: the
    arguments a session was really given (pytest's ``invocation_params.args``), when this
    process's own command line does not end with them (``pytest.main`` in a process)."""
    import shlex
    import sys

    argv = [str(a) for a in (getattr(sys, "orig_argv", None) or sys.argv)]
    if args is None:
        return shlex.join(argv)
    args = [str(a) for a in args]
    if not args or (len(argv) > len(args) and argv[-len(args) :] == args):
        return shlex.join(argv)
    return shlex.join(["pytest", *args])


def invocation(args: Sequence[str] | None = None) -> dict[str, str]:
    """This process: when (UTC, ISO 8601) and :func:`command_line`."""
    import datetime

    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command_line": command_line(args),
    }


def run_provenance(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Where a stored run's numbers come from, from its manifest: when and by which command
    they were computed, the model (name, given as, revision, content hash in its fingerprint),
    the dataset (name, given as, fingerprint), the seed and the environment."""
    env = manifest.get("environment") or {}
    settings = manifest.get("settings") or {}
    return {
        "computed": manifest.get("created"),
        "command_line": manifest.get("command_line"),
        "benchc_commit": manifest.get("benchc_commit"),
        "model": manifest.get("model_name"),
        "model_spec": manifest.get("model_spec"),
        "model_revision": manifest.get("model_revision"),
        "model_fingerprint": manifest.get("model_fingerprint"),
        "dataset": manifest.get("dataset_name"),
        "dataset_spec": manifest.get("dataset_spec"),
        "dataset_fingerprint": manifest.get("dataset_fingerprint"),
        "seed": settings.get("seed"),
        **{k: env.get(k, settings.get(k)) for k in FIELDS},
    }


def session(command: str | None = None) -> dict[str, Any]:
    """This process as provenance: :func:`invocation` (``command``: the session's command line
    when known) plus the benchc version and commit."""
    from benchc import __version__

    now = invocation()
    if command:
        now["command_line"] = command
    return {**now, "benchc": __version__, "benchc_commit": git_commit()}


def provenance(
    manifest: Mapping[str, Any],
    baseline: Mapping[str, Any] | None = None,
    session: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``report.json`` ``provenance``: ``run``, where the numbers shown come from
    (:func:`run_provenance`: when and by which command they were computed, model, dataset,
    seed, environment); ``session``, the suite run that wrote the report (:func:`session`;
    None for ``benchc report``, whose page is a pure function of the stored files); and
    ``baseline``, the baseline's recorded manifest (model and environment) when there is one."""
    from benchc import __version__

    return {
        "report_benchc": __version__,
        "run": run_provenance(manifest),
        "session": dict(session) if session else None,
        "baseline": dict(baseline) if baseline else None,
    }


__all__ = [
    "FIELDS", "command_line", "differences", "environment", "git_commit", "invocation",
    "numeric_versions", "provenance", "run_provenance", "session",
]  # fmt: skip
