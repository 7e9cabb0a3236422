"""Region locators (docs/spec.md §5: the pluggable step between the annotation and the
whole-image fallback)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest
from PIL import Image

from benchc.corruptions.locate import ForegroundLocator, resolve_locator
from benchc.data import synthetic
from benchc.suite.config import ConfigError, SuiteConfig


def _contains(outer, inner, slack: int = 0) -> bool:
    return (
        outer[0] <= inner[0] + slack
        and outer[1] <= inner[1] + slack
        and outer[2] >= inner[2] - slack
        and outer[3] >= inner[3] - slack
    )


def _area(r) -> int:
    return (r[2] - r[0]) * (r[3] - r[1])


def _inter(a, b) -> int:
    w = max(0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
    return w * h


def _iou(a, b) -> float:
    return _inter(a, b) / (_area(a) + _area(b) - _inter(a, b))


def _overlap(a, b) -> float:
    """Share of ``a`` inside ``b``."""
    return _inter(a, b) / _area(a)


@pytest.mark.parametrize("i", range(12))
def test_foreground_box_covers_the_annotated_region_of_synthetic_samples(i):
    item = synthetic.make_item(i, 5)
    box = ForegroundLocator()(Image.fromarray(item.image))
    if item.kind == "chart":  # axes and grid lines span the plot: content fills the image
        return
    assert box is not None
    if item.kind in ("colour", "position"):  # the annotation is one shape among several drawn
        assert _overlap(item.region, box) >= 0.7, (item.kind, box, item.region)
        return
    # the annotation is the shapes' nominal boxes, the locator finds the drawn pixels: inside
    # the annotation (up to 1 px of rounding) and covering most of it
    assert _contains(item.region, box, slack=1), (item.kind, box, item.region)
    assert _iou(box, item.region) >= 0.7, (item.kind, box, item.region)


def test_foreground_box_is_tight_around_a_drawn_rectangle():
    arr = np.full((40, 60, 3), 200, np.uint8)
    arr[10:20, 30:45] = (10, 120, 250)
    assert ForegroundLocator()(Image.fromarray(arr)) == (30, 10, 45, 20)


def test_blank_or_full_images_give_no_region():
    blank = Image.fromarray(np.full((32, 32, 3), 90, np.uint8))
    assert ForegroundLocator()(blank) is None
    noise = np.random.default_rng(0).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    assert ForegroundLocator()(Image.fromarray(noise)) is None  # box ~ whole image


def test_foreground_rejects_bad_parameters():
    with pytest.raises(ValueError, match="tolerance"):
        ForegroundLocator(tolerance=300)
    with pytest.raises(ValueError, match="max_cover"):
        ForegroundLocator(max_cover=0)


def test_resolve_by_name_and_by_import_path(monkeypatch):
    assert resolve_locator("none") is None
    assert isinstance(resolve_locator("foreground"), ForegroundLocator)
    mod = types.ModuleType("my_locators")
    mod.centre = lambda image: (1, 1, 3, 3)
    mod.Box = type("Box", (), {"__call__": lambda self, image: (0, 0, 2, 2)})
    monkeypatch.setitem(sys.modules, "my_locators", mod)
    assert resolve_locator("my_locators:centre")(None) == (1, 1, 3, 3)
    assert resolve_locator("my_locators:Box")(None) == (0, 0, 2, 2)  # classes are instantiated


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("saliency", "unknown region locator 'saliency'"),
        ("no_such_module_xyz:f", "cannot be imported"),
        ("benchc.spec:VSI_SIGMA", "not callable"),
    ],
)
def test_bad_locators_name_what_is_wrong(name, message):
    with pytest.raises(ValueError, match=message):
        resolve_locator(name)


def test_config_rejects_an_unknown_locator_before_loading_anything(tmp_path):
    get = {"benchc_seed": 0, "benchc_region_locator": "saliency"}.get
    with pytest.raises(ConfigError, match="--region-locator"):
        SuiteConfig.from_options(get, rootdir=tmp_path)
    ok = SuiteConfig.from_options({"benchc_seed": 0}.get, rootdir=tmp_path)
    assert ok.region_locator == "none"
