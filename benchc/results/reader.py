"""The one reader of a finished (or partial) run folder, for the suite and the report alike.

A run folder holds ``manifest.json``, the per-sample table ``samples.npz``, one ``<condition>.npz``
of option logits per finished condition and, once the VSI cases ran, ``vsi-region-blur*.npz``.
Knowing those names in one place means the suite that writes them and every reader of a stored
run (``benchc report``, ``benchc compare``, ``pytest --report``) cannot drift apart. Arrays are
read through :func:`benchc.results.store.load_npz` and the manifest through
:func:`benchc.results.store.read_manifest` (pickle-free, checksums verified, one clear error
naming the bad file).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from benchc import spec
from benchc.metrics import GridMetrics, compute_grid
from benchc.results.store import StoreError, load_npz, read_manifest

#: Stored name of the per-sample table (ids, answers, option counts).
SAMPLES = "samples"
#: Stored name of the VSI arrays; ``<VSI>.<locator slug>`` under ``--region-locator``.
VSI = "vsi-region-blur"
MANIFEST = "manifest.json"


def stack_conditions(
    load: Callable[[str], np.ndarray], corruptions: Sequence[str], severities: Sequence[int]
) -> np.ndarray:
    """(N, D, L, K_max) option logits, ``load(condition key)`` giving each (N, K_max) slice."""
    return np.stack(
        [
            np.stack([load(spec.condition_key(c, s)) for s in severities], axis=1)
            for c in corruptions
        ],
        axis=1,
    )


@dataclass(frozen=True)
class StoredRun:
    """A run folder's manifest, sample table, complete corruption x severity grid and VSI arrays.

    ``corruptions`` x ``severities`` is the largest complete grid stored (a partial run reports
    what it has); ``logits`` is (N, D, L, K_max) or None when no grid or no clean condition.
    """

    path: Path
    manifest: dict[str, Any]
    ids: tuple[str, ...]
    answers: np.ndarray
    n_options: np.ndarray
    corruptions: tuple[str, ...]
    severities: tuple[int, ...]
    clean_logits: np.ndarray | None
    logits: np.ndarray | None
    vsi: dict[str, np.ndarray] | None = None
    vsi_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cells(self) -> list[str]:
        return [spec.condition_key(c, s) for c in self.corruptions for s in self.severities]

    @property
    def model_name(self) -> str:
        return str(self.manifest.get("model_name", "model"))

    @property
    def dataset_name(self) -> str:
        return str(self.manifest.get("dataset_name", "dataset"))

    @property
    def seed(self) -> int:
        return int(self.manifest.get("settings", {}).get("seed", spec.DEFAULT_SEED))

    @cached_property
    def grid(self) -> GridMetrics | None:
        """Every Bench-C figure of the stored grid (None without a complete grid)."""
        if self.logits is None or self.clean_logits is None:
            return None
        return compute_grid(
            self.clean_logits,
            self.logits,
            self.answers,
            self.n_options,
            corruptions=self.corruptions,
        )


def find_runs(path: Path) -> list[Path]:
    """Run folders at or under ``path`` (a run folder, a model folder or a ``--results-dir``)."""
    path = Path(path)
    if (path / MANIFEST).is_file():
        return [path]
    return [
        p.parent for p in sorted(path.glob(f"**/{MANIFEST}")) if not p.parent.name.startswith(".")
    ]


def _complete_grid(names: set[str]) -> tuple[tuple[str, ...], tuple[int, ...]]:
    parsed: list[tuple[str, int]] = []
    for name in names:
        try:
            c, s = spec.parse_condition(name)
        except ValueError:
            continue
        if c is not None and s is not None:
            parsed.append((c, s))
    severities = tuple(sorted({s for _, s in parsed}))
    corruptions = tuple(
        c
        for c in spec.CORRUPTIONS
        if severities and all(spec.condition_key(c, s) in names for s in severities)
    )
    return corruptions, severities if corruptions else ()


def read_run(run_dir: Path) -> StoredRun:
    """Read a run folder written by :class:`benchc.suite.run.SuiteRun`.

    Raises ``FileNotFoundError`` naming the folder when it is not a run, and
    :class:`benchc.results.store.StoreError` naming the file when an array file is unreadable
    or disagrees with the sample table.
    """
    run_dir = Path(run_dir)
    manifest_path = run_dir / MANIFEST
    samples_path = run_dir / f"{SAMPLES}.npz"
    if not manifest_path.is_file() or not samples_path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a benchc results folder (no {MANIFEST} or {SAMPLES}.npz)"
        )
    manifest = read_manifest(run_dir)  # checksum-verified; StoreError names a damaged one
    samples = load_npz(samples_path)
    ids = tuple(str(x) for x in samples["ids"])
    n = len(ids)

    def logits_of(key: str) -> np.ndarray:
        path = run_dir / f"{key}.npz"
        arr = load_npz(path)["option_logits"]
        if arr.shape[0] != n:
            raise StoreError(f"{path} has {arr.shape[0]} rows, {samples_path} has {n} samples")
        return arr

    names = {p.stem for p in run_dir.glob("*.npz")}
    corruptions, severities = _complete_grid(names)
    clean = logits_of(spec.CLEAN) if spec.CLEAN in names else None
    cube = None
    if clean is not None and corruptions:
        cube = stack_conditions(logits_of, corruptions, severities)
    vsi_paths = sorted(run_dir.glob(f"{VSI}*.npz"), key=lambda p: (len(p.name), p.name))
    vsi = load_npz(vsi_paths[0]) if vsi_paths else None
    if vsi is not None and vsi["vsi"].shape[0] != n:
        raise StoreError(f"{vsi_paths[0]} has {vsi['vsi'].shape[0]} rows, the run has {n} samples")
    return StoredRun(
        path=run_dir,
        manifest=manifest,
        ids=ids,
        answers=np.asarray(samples["answers"]),
        n_options=np.asarray(samples["n_options"]),
        corruptions=corruptions,
        severities=severities,
        clean_logits=clean,
        logits=cube,
        vsi=vsi,
        vsi_name=vsi_paths[0].stem if vsi_paths else None,
    )
