"""Named baselines: which recorded threshold folder a run is gated against, and what it holds.

A release gates a candidate (any folder, hub id or server) against the baseline recorded from
the released checkpoint, so the baseline is named (``--baseline NAME`` inside
``--thresholds-dir``, or ``--baseline PATH``), never inferred from the candidate; without a name
it is the model's own slug, as before. A baseline folder holds one snapshot per case and
``baseline.manifest`` (JSON): what it was recorded from (model, dataset and VSI set as given, model
arguments) and where (:mod:`benchc.provenance`). Everything a run must agree on is read here
from the snapshots themselves (:func:`recorded`), so a folder without a manifest (an older
recording) is checked just the same.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchc import spec
from benchc.fsutil import display_path, slug

#: The file describing a baseline folder (not a snapshot; syrupy never sees it).
MANIFEST = "baseline.manifest"
#: Version of :data:`MANIFEST`'s layout.
MANIFEST_FORMAT = 1


def normalise(value: str, thresholds_dir: Path, rootdir: Path) -> str:
    """``--baseline``'s value: a name (kept) or a folder (made absolute). A value with a path
    separator, or a folder under ``rootdir`` that is not a baseline inside ``thresholds_dir``,
    is a path."""
    value = value.strip()
    if not value:
        raise ValueError("empty baseline name")
    p = Path(os.path.expanduser(value))
    looks_like_path = p.is_absolute() or "/" in value or os.sep in value or value[0] in ".~"
    if not looks_like_path and (Path(thresholds_dir) / value).is_dir():
        return value
    if looks_like_path or (rootdir / p).is_dir():
        return str(p if p.is_absolute() else (rootdir / p).resolve())
    return value


@dataclass(frozen=True)
class BaselineRef:
    """The baseline of a run: its name, its folder and how it was named."""

    name: str
    folder: Path
    #: What ``--baseline`` said (None: the model's own slug).
    given: str | None = None

    @property
    def source(self) -> str:
        return display_path(self.folder)

    @property
    def label(self) -> str:
        return f"{self.name} ({self.source})"

    @property
    def exists(self) -> bool:
        return self.folder.is_dir()

    @property
    def manifest(self) -> dict[str, Any]:
        """``baseline.manifest`` (``{}`` when there is none)."""
        return read_manifest(self.folder)

    def snapshot(self, level: str, name: str) -> Path:
        """The snapshot file of the gate case ``level`` / ``name`` (a cell's or family's scope,
        a model or VSI figure): named after the gate, not the pytest test that checks it. A
        folder recorded before keeps its files (``test_cell-fog-3.json``), read where no file of
        the gate's own name exists."""
        own = self.folder / f"{snapshot_stem(level, name)}.json"
        legacy = self.folder / f"{LEGACY_PREFIX}{own.name}"
        return legacy if legacy.is_file() and not own.is_file() else own

    def recorded_n(self) -> int | None:
        """The samples the baseline was recorded on (a model-level snapshot's ``n``): the
        whole dataset a sequential gate's looks take their samples from."""
        for path in snapshot_files(self.folder):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and data.get("level") == "model" and data.get("n"):
                return int(data["n"])
        return None

    def legacy_snapshot(self, level: str, name: str) -> Path:
        """The file a recording before gate-named snapshots wrote for this case."""
        return self.folder / f"{LEGACY_PREFIX}{snapshot_stem(level, name)}.json"


#: Snapshot files recorded before they were named after their gate began with the pytest test's
#: name: ``test_cell-fog-3.json`` for the gate ``cell-fog-3.json``.
LEGACY_PREFIX = "test_"


def snapshot_stem(level: str, name: str) -> str:
    """``("cell", "fog-3")`` -> ``cell-fog-3``: a portable file stem of one gate case."""
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", f"{level}-{name}")


def resolve(thresholds_dir: Path, given: str | None, model_name: str | None) -> BaselineRef:
    """The baseline ``--baseline`` names (see :func:`normalise`), else ``model_name``'s slug."""
    if given is None:
        if model_name is None:
            raise ValueError("no baseline named and no model name to default to")
        name = slug(model_name)
        return BaselineRef(name, Path(thresholds_dir) / name)
    if Path(given).is_absolute():
        return BaselineRef(Path(given).name, Path(given), given)
    return BaselineRef(given, Path(thresholds_dir) / given, given)


def locate(path: Path, model_name: str | None = None) -> BaselineRef:
    """A baseline given as a path (``benchc report --baseline DIR``, a report's recorded
    baseline): the folder itself when it is a baseline (or no model names one inside it), else
    the baseline named after ``model_name`` inside it, as :func:`resolve` names it."""
    path = Path(path)
    if model_name is None or is_baseline_folder(path):
        return BaselineRef(path.name, path, str(path))
    return resolve(path, None, model_name)


def snapshot_files(folder: Path) -> list[Path]:
    """The case snapshots of a baseline folder (``baseline.manifest`` (JSON) is not one)."""
    if not Path(folder).is_dir():
        return []
    return sorted(p for p in Path(folder).glob("*.json") if p.name != MANIFEST)


def available(thresholds_dir: Path) -> list[str]:
    """Names of the baselines recorded in ``thresholds_dir``: folders benchc recorded
    (:func:`is_recorded`), never a checkpoint's or a report's folder that merely holds JSON."""
    root = Path(thresholds_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and is_recorded(p))


def is_recorded(folder: Path, *, probe: int = 5) -> bool:
    """``folder`` is a baseline benchc recorded: it has :data:`MANIFEST`, or one of its first
    ``probe`` JSON files is a threshold snapshot (an older recording has no manifest)."""
    folder = Path(folder)
    if (folder / MANIFEST).is_file():
        return True
    for path in snapshot_files(folder)[:probe]:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and "benchc_snapshot" in data:
            return True
    return False


def is_baseline_folder(folder: Path) -> bool:
    return bool(snapshot_files(folder))


def read_manifest(folder: Path) -> dict[str, Any]:
    """``baseline.manifest`` (JSON) of a folder; ``{}`` when it has none or it is unreadable."""
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_manifest(folder: Path, data: dict[str, Any]) -> Path:
    """Write ``baseline.manifest`` (JSON) (stable, reviewable JSON)."""
    path = Path(folder) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"benchc_baseline": MANIFEST_FORMAT, **data}
    path.write_text(json.dumps(body, indent=1, sort_keys=True, default=str) + "\n")
    return path


@dataclass
class Recorded:
    """What a baseline folder's snapshots agree on: the settings a run must share with it."""

    folder: Path
    #: Info of the grid snapshots (cells, families, model): dataset fingerprint, size, seed.
    grid: dict[str, Any] = field(default_factory=dict)
    #: The cells the model-level snapshots were recorded over.
    conditions: list[str] = field(default_factory=list)
    #: Info of the VSI snapshots: the VSI set's fingerprint, its image size, the variant.
    vsi: dict[str, Any] = field(default_factory=dict)
    #: Snapshot format of each file that is not this benchc's: ``{file name: format}``.
    formats: dict[str, Any] = field(default_factory=dict)
    #: The model names the snapshots were recorded from.
    models: set[str] = field(default_factory=set)
    datasets: set[str] = field(default_factory=set)
    manifest: dict[str, Any] = field(default_factory=dict)

    @property
    def vsi_support(self) -> str | None:
        variant = self.vsi.get("vsi_variant")
        if variant is None:
            return None
        return "full" if variant == spec.VSI_VARIANTS["full"] else "top50"


def recorded(folder: Path) -> Recorded:
    """Read every snapshot's header (not its evidence): what the run must agree with."""
    from benchc.gates.payload import FORMAT

    out = Recorded(Path(folder), manifest=read_manifest(folder))
    for path in snapshot_files(folder):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # the case itself reports an unreadable snapshot
        if not isinstance(data, dict):
            continue
        if data.get("benchc_snapshot") != FORMAT:
            out.formats[path.name] = data.get("benchc_snapshot")
            continue
        info = data.get("info") or {}
        keys = ("dataset_fingerprint", "image_size", "seed")
        if data.get("level") == "vsi":
            out.vsi.setdefault("dataset", data.get("dataset"))
            for k in (*keys, "vsi_variant"):
                out.vsi.setdefault(k, info.get(k))
        else:
            out.grid.setdefault("dataset", data.get("dataset"))
            for k in keys:
                out.grid.setdefault(k, info.get(k))
            if data.get("level") == "model" and not out.conditions:
                out.conditions = list(info.get("conditions") or [])
        out.models.add(str(data.get("model")))
        out.datasets.add(str(data.get("dataset")))
    return out


__all__ = [
    "LEGACY_PREFIX",
    "MANIFEST",
    "BaselineRef",
    "Recorded",
    "available",
    "is_baseline_folder",
    "is_recorded",
    "locate",
    "normalise",
    "read_manifest",
    "recorded",
    "resolve",
    "snapshot_files",
    "snapshot_stem",
    "write_manifest",
]
