"""The syrupy extension for threshold snapshots, assembled from three small mixins.

syrupy stores and recalls the files and handles ``--snapshot-update``; the mixins decide where
the files live (``thresholds/<model-slug>/<case>.json``), how a payload becomes JSON, and what
"matches" means: the one-sided gate of SPEC section 6 instead of byte equality. Under
``--snapshot-update`` a match is exact equality, so improvements are recorded too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from syrupy.data import SnapshotCollections
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from benchc.fsutil import slug as model_slug  # noqa: F401  (the one slug rule)
from benchc.gates.payload import Payload, compare, report

if TYPE_CHECKING:
    from syrupy.location import PyTestLocation


def case_name(test_name: str) -> str:
    """``test_cell[gaussian_noise-3]`` -> ``test_cell-gaussian_noise-3`` (a portable file stem
    that still starts with the test function's name, which syrupy relates to the test)."""
    name = test_name.rsplit(".", 1)[-1]
    name = name.replace("[", "-").replace("]", "")
    return re.sub(r"[^A-Za-z0-9_.\-]+", "_", name)


def cell_file(key: str) -> str:
    """The snapshot file name of cell ``key`` (``fog-3`` -> ``test_cell-fog-3.json``)."""
    return f"{case_name(f'test_cell[{key}]')}.json"


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
    """Serialise a :class:`Payload` as stable, indented JSON text."""

    _write_mode = WriteMode.TEXT

    def serialize(self, data: Any, **_: Any) -> str:
        if not isinstance(data, Payload):
            raise TypeError(f"threshold snapshots hold benchc Payloads, not {type(data).__name__}")
        return data.to_json()


class ToleranceComparatorMixin:
    """Match = no gate failed (one-sided, tolerance max(floor, z x SE))."""

    update: ClassVar[bool] = False

    def matches(self, *, serialized_data: Any, snapshot_data: Any) -> bool:
        if self.update:
            return serialized_data == snapshot_data
        baseline = Payload.from_json(snapshot_data, where="threshold snapshot")
        current = Payload.from_json(serialized_data, where="current figures")
        return not any(o.status == "fail" for o in compare(baseline, current))

    def diff_lines(self, serialized_data: Any, snapshot_data: Any) -> Iterator[str]:
        if not snapshot_data:
            yield "no threshold snapshot recorded for this case"
            return
        baseline = Payload.from_json(snapshot_data, where="threshold snapshot")
        current = Payload.from_json(serialized_data, where="current figures")
        yield from report(baseline, current)


class ThresholdExtension(
    ThresholdLocationMixin,
    PayloadSerializerMixin,
    ToleranceComparatorMixin,
    SingleFileSnapshotExtension,
):
    """Threshold snapshots for one model; :func:`extension_for` binds root, slug and mode."""


def extension_for(root: str | Path, slug: str, *, update: bool) -> type[ThresholdExtension]:
    """A subclass bound to one thresholds folder and model (syrupy instantiates classes)."""
    return type(
        f"ThresholdExtension_{re.sub(r'[^A-Za-z0-9_]', '_', slug)}",
        (ThresholdExtension,),
        {"root": str(root), "slug": slug, "update": update},
    )
