"""The one reader of a finished (or partial) run folder, for the suite and the report alike.

A run folder holds ``manifest.json``, the per-sample table ``samples.npz``, one ``<condition>.npz``
of option logits per finished condition and, once the VSI cases ran, ``vsi-aligned*.npz``.
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
from benchc.metrics.options import require_answered
from benchc.results.store import StoreError, load_npz, read_manifest

#: Stored name of the per-sample table (ids, answers, option counts).
SAMPLES = "samples"
#: Stored name of the VSI arrays; ``<VSI>.<locator slug>`` under ``--region-locator``. Arrays
#: stored as ``vsi-blur`` hold the 1e-12-floored top-50 VSI (before docs/spec.md §5's aligned
#: support): not read, so a rerun recomputes them instead of gating on the old definition.
VSI = "vsi-aligned"
#: The name before the whole-image pass existed (region blur only): still read, and the report
#: says what such a run lacks.
LEGACY_VSI = "vsi-region-blur"


def vsi_files(run_dir: Path) -> list[Path]:
    """A run folder's VSI array files, the plain locator first, current before legacy names."""
    return [
        p
        for name in (VSI, LEGACY_VSI)
        for p in sorted(run_dir.glob(f"{name}*.npz"), key=lambda p: (len(p.name), p.name))
    ]


MANIFEST = "manifest.json"
#: Stored name prefix of one condition's option logits under the samples' other rotations
#: (docs/spec.md §1, option order): ``order.<condition>`` holds ``option_logits`` (N, R_max - 1,
#: K_max) and ``offsets`` (N, R_max).
ORDER = "order"


def order_name(condition: str) -> str:
    """The stored name of ``condition``'s rotated option logits."""
    return f"{ORDER}.{condition}"


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
    #: Row ids of ``vsi`` when it comes from another run folder (a separate VSI set).
    vsi_ids: tuple[str, ...] | None = None
    #: Correct option index of each ``vsi`` row (the VSI set's own when it is separate).
    vsi_answers: np.ndarray | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: Clean option mass per sample (docs/spec.md §2: < 0.5, the model is not answering with a
    #: letter); None where the clean condition stores none.
    option_mass: np.ndarray | None = None
    #: Rotated conditions (clean and grid cells) -> their stored ``order.<condition>`` arrays.
    order: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)

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
        require_answered(
            self.clean_logits,
            self.logits,
            self.n_options,
            self.ids,
            self.corruptions,
            self.severities,
        )
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


def _has_vsi(run_dir: Path) -> bool:
    return bool(vsi_files(run_dir))


def has_grid(run_dir: Path) -> bool:
    names = {p.stem for p in run_dir.glob("*.npz")}
    return spec.CLEAN in names and bool(_complete_grid(names)[0])


def _manifest_or_empty(run_dir: Path) -> dict[str, Any]:
    try:
        return read_manifest(run_dir)
    except StoreError:  # reading the run itself reports it, in one clear line
        return {}


def group_runs(run_dirs: Sequence[Path]) -> list[tuple[Path, Path | None]]:
    """``(grid run, VSI run or None)`` per model: one pytest session stores the corruption grid
    and, when the VSI gates use their own dataset, the VSI arrays in a second run folder of the
    same model fingerprint and seed; those two belong on one page. A run with neither a
    grid nor a partner is kept on its own."""
    dirs = [Path(d) for d in run_dirs]
    manifests = {d: _manifest_or_empty(d) for d in dirs}

    def key(d: Path) -> tuple:
        m = manifests[d]
        return (m.get("model_fingerprint"), m.get("settings", {}).get("seed"))

    grids = [d for d in dirs if has_grid(d)]
    used: set[Path] = set()
    out: list[tuple[Path, Path | None]] = []
    for g in grids:
        # a dedicated VSI run of the same model and seed wins over VSI arrays the grid run
        # may hold from an earlier session that computed VSI on the grid's own dataset
        vsi = next(
            (d for d in dirs if d not in grids and d not in used and _has_vsi(d)
             and key(d) == key(g)),
            g if _has_vsi(g) else None,
        )  # fmt: skip
        if vsi is not None and vsi != g:
            used.add(vsi)
        out.append((g, vsi))
    out += [(d, d if _has_vsi(d) else None) for d in dirs if d not in grids and d not in used]
    return out


def read_run(run_dir: Path, *, vsi_dir: Path | None = None) -> StoredRun:
    """Read a run folder written by :class:`benchc.suite.run.SuiteRun`; ``vsi_dir`` names the
    run folder holding the VSI arrays when they were computed on another dataset.

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
    mass = None
    if clean is not None:
        stored = load_npz(run_dir / f"{spec.CLEAN}.npz")
        if "option_mass" in stored and np.shape(stored["option_mass"]) == (n,):
            mass = np.asarray(stored["option_mass"], dtype=np.float64)
    cube = None
    if clean is not None and corruptions:
        cube = stack_conditions(logits_of, corruptions, severities)
    vsi_ids: tuple[str, ...] | None = None
    vsi_home = Path(vsi_dir) if vsi_dir is not None else run_dir
    vsi_paths = vsi_files(vsi_home)
    vsi = load_npz(vsi_paths[0]) if vsi_paths else None
    n_vsi = n
    vsi_answers = np.asarray(samples["answers"]) if vsi is not None else None
    if vsi is not None and vsi_home != run_dir:
        vsi_samples = load_npz(vsi_home / f"{SAMPLES}.npz")
        vsi_ids = tuple(str(x) for x in vsi_samples["ids"])
        vsi_answers = np.asarray(vsi_samples["answers"])
        n_vsi = len(vsi_ids)
    if vsi is not None and vsi["vsi"].shape[0] != n_vsi:
        raise StoreError(
            f"{vsi_paths[0]} has {vsi['vsi'].shape[0]} rows, its run has {n_vsi} samples"
        )
    order = {}
    for key in (spec.CLEAN, *(spec.condition_key(c, s) for c in corruptions for s in severities)):
        if order_name(key) in names:
            path = run_dir / f"{order_name(key)}.npz"
            arrays = load_npz(path)
            if arrays["option_logits"].shape[0] != n:
                raise StoreError(f"{path} has {arrays['option_logits'].shape[0]} rows, "
                                 f"{samples_path} has {n} samples")  # fmt: skip
            order[key] = arrays
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
        vsi_ids=vsi_ids,
        vsi_answers=vsi_answers,
        option_mass=mass,
        order=order,
    )
