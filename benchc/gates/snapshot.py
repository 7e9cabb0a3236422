"""The syrupy extension for threshold snapshots, assembled from three small mixins.

syrupy stores and recalls the files and handles ``--snapshot-update``; the mixins decide where
the files live (``thresholds/<baseline>/<gate>.json``) and how a payload becomes JSON; a match
is exact equality, so every recording writes. Whether a gate passes is the gate engine's
decision (:mod:`benchc.gates.engine`), never syrupy's comparator.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from syrupy.data import SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension

from benchc import spec
from benchc.fsutil import slug as model_slug  # noqa: F401  (the one slug rule)
from benchc.gates import sidecar
from benchc.gates.payload import Payload

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation


def case_name(test_name: str) -> str:
    """``test_cell[gaussian_noise-3]`` -> ``test_cell-gaussian_noise-3`` (a portable file stem
    that still starts with the test function's name, which syrupy relates to the test)."""
    name = test_name.rsplit(".", 1)[-1]
    name = name.replace("[", "-").replace("]", "")
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name)


class ThresholdLocationMixin:
    """Files live in ``<root>/<slug>/``, one per case, named after the test id."""

    root: ClassVar[str] = "thresholds"
    slug: ClassVar[str] = "model"
    file_extension = "json"

    @classmethod
    def dirname(cls, *, test_location: PyTestLocation) -> str:
        return str(Path(cls.root) / cls.slug)

    @classmethod
    def discovery_dirname(cls, *, test_location: PyTestLocation) -> str:
        return cls.dirname(test_location=test_location)

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: Any = 0) -> str:
        """The gate's own name (``snapshot(name=...)``: :func:`benchc.gates.baselines.
        snapshot_stem`), else the test's (a snapshot asserted without one)."""
        if isinstance(index, str) and index:
            return index
        return case_name(test_location.snapshot_name)

    @classmethod
    def matches_test_location(
        cls, *, test_location: PyTestLocation, snapshot_location: str
    ) -> bool:
        # Laid out per model, not per test file: a file in the model's folder is the case's.
        return Path(snapshot_location).parent == Path(cls.root) / cls.slug

    def discover_snapshots(self, **_: Any) -> SnapshotCollections:
        # Thresholds of cells not run this session (``-k blur``, ``--corruptions``) are not
        # "unused": never let syrupy report or delete them.
        return SnapshotCollections()


class PayloadSerializerMixin:
    """Serialise a :class:`Payload` as stable, indented JSON that names its sidecar, encoded as
    UTF-8 here: syrupy's single-file extension writes bytes as given (its text mode is set
    through a private attribute), so the file is exactly the JSON text."""

    def serialize(self, data: Any, **_: Any) -> bytes:
        if not isinstance(data, Payload):
            raise TypeError(f"threshold snapshots hold benchc Payloads, not {type(data).__name__}")
        if data.evidence is None:
            return data.to_json().encode("utf-8")
        sidecar.remember(data.evidence)
        return data.to_json(evidence_file=sidecar.relpath(data.evidence)).encode("utf-8")


def recorded_vsi_support(model_folder: Path) -> str:
    """The VSI support a model's VSI snapshots were recorded with (docs/spec.md §5), so an
    offline check and a re-record keep the variant the build gated; the default without one."""
    from benchc.gates.baselines import BaselineRef
    from benchc.gates.figures import figures

    ref = BaselineRef(Path(model_folder).name, Path(model_folder))
    for f in figures("vsi", gated_only=True):
        path = ref.snapshot("vsi", f.name)
        try:
            variant = json.loads(path.read_text())["info"]["vsi_variant"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        return "full" if variant == spec.VSI_VARIANTS["full"] else "top50"
    return spec.VSI_SUPPORT


def load_baseline(path: Path) -> Payload:
    """A recorded snapshot with its verified evidence attached (``ValueError`` /
    :class:`EvidenceError` naming the file when either is unusable)."""
    baseline = Payload.from_json(path.read_text(encoding="utf-8"), where=str(path))
    evidence = sidecar.load(
        path.parent, baseline.evidence_file, baseline.evidence_digest, where=str(path)
    )
    return baseline.with_evidence(evidence)


class ExactComparatorMixin:
    """Match = the same bytes. syrupy only writes snapshots (``--snapshot-update``); whether a
    gate passes is the gate engine's decision (:mod:`benchc.gates.engine`), never syrupy's."""

    update: ClassVar[bool] = False

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        return serialized_data == snapshot_data

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        yield (
            "threshold snapshots are checked by the gate engine, not compared by syrupy: "
            "record them with --snapshot-update"
        )


class ThresholdExtension(
    ThresholdLocationMixin,
    PayloadSerializerMixin,
    ExactComparatorMixin,
    SingleFileSnapshotExtension,
):
    """Threshold snapshots for one model; :func:`extension_for` binds root, slug and mode."""


def extension_for(
    root: str | Path,
    slug: str,
    *,
    update: bool,
) -> type[ThresholdExtension]:
    """A subclass bound to one thresholds folder and baseline, and the mode (syrupy
    instantiates classes)."""
    return type(
        f"ThresholdExtension_{re.sub(r'[^A-Za-z0-9_]', '_', slug)}",
        (ThresholdExtension,),
        {
            "root": str(root),
            "slug": slug,
            "update": update,
        },
    )
