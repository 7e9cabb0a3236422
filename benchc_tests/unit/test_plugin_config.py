"""Suite configuration: option parsing, path resolution, image size and device policy, and
the degraded wrapper used by the suite's own tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchc import spec
from benchc.models.base import Backend, BatchOutput, Query
from benchc.suite.config import (
    DEFAULT_DATASET,
    ConfigError,
    SuiteConfig,
    parse_corruptions,
    parse_degrade,
    parse_severities,
)
from benchc.suite.gate import record_command
from benchc.testing.degrade import DegradedBackend, damp_image


def test_corruptions_accept_names_and_families_in_canonical_order():
    assert parse_corruptions(None) == spec.CORRUPTIONS
    assert parse_corruptions("fog,noise") == (
        "gaussian_noise", "shot_noise", "impulse_noise", "fog", "speckle_noise",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="unknown corruption or family 'fgo'"):
        parse_corruptions("fgo")


def test_severities_lists_and_ranges():
    assert parse_severities("all") == (1, 2, 3, 4, 5)
    assert parse_severities("5,1-2") == (1, 2, 5)
    with pytest.raises(ConfigError, match="6 is outside"):
        parse_severities("4-6")


def _options(**values):
    defaults = {"benchc_seed": 0}
    defaults.update(values)
    return lambda name: defaults.get(name)


def test_from_options_resolves_paths_against_rootdir(tmp_path):
    (tmp_path / "data").mkdir()
    cfg = SuiteConfig.from_options(
        _options(benchc_dataset="data", benchc_model="org/name", benchc_results_dir="res"),
        rootdir=tmp_path,
    )
    assert cfg.dataset == str(tmp_path / "data")
    assert cfg.model == "org/name"  # not a local path: a hub id stays as given
    assert cfg.results_dir == tmp_path / "res"
    assert cfg.thresholds_dir == tmp_path / "thresholds"
    assert cfg.conditions == spec.all_conditions()


def test_image_size_native_for_the_embedded_testbed_else_448():
    assert SuiteConfig(dataset=DEFAULT_DATASET).resolved_image_size() is None
    assert SuiteConfig(dataset="/elsewhere").resolved_image_size() == 448
    assert SuiteConfig(dataset="/elsewhere", image_size=224).resolved_image_size() == 224


def test_device_policy():
    assert SuiteConfig(device="cpu").resolved_device() == "cpu"
    assert SuiteConfig(device="cuda:1").resolved_device() == "cuda:1"


def test_record_command_reproduces_the_selection(tmp_path):
    cfg = SuiteConfig(
        model="org/m", corruptions=("fog",), severities=(1, 5), thresholds_dir=tmp_path
    )
    cmd = record_command(cfg)
    assert cmd.startswith("pytest benchc_tests/suite --model=org/m --corruptions=fog")
    assert "--severities=1,5" in cmd and cmd.endswith("--snapshot-update")


def test_a_look_past_the_last_is_a_usage_error_before_anything_loads(tmp_path):
    """``--look`` beyond ``--looks`` has no budget left: one ConfigError naming both options
    (the plugin's usage error), not a ValueError from the budget after collection."""
    ok = SuiteConfig.from_options(_options(benchc_looks=2, benchc_look=2), rootdir=tmp_path)
    assert (ok.looks, ok.look) == (2, 2)
    with pytest.raises(ConfigError, match=r"--look=3 with --looks=2: .* no look after its last"):
        SuiteConfig.from_options(_options(benchc_looks=2, benchc_look=3), rootdir=tmp_path)
    with pytest.raises(ConfigError, match="--look=2 with --looks=1"):
        SuiteConfig.from_options(_options(benchc_look=2), rootdir=tmp_path)


def test_parse_degrade():
    assert parse_degrade("damp=0.3,sharpen=2") == {"damp": 0.3, "sharpen": 2.0}
    with pytest.raises(ConfigError, match="is not a number"):
        parse_degrade("damp=x")


class _Fixed(Backend):
    """Letter A is three times as likely as B, over a 4-token vocabulary."""

    name, fingerprint = "fixed", "fixed-1"

    def forward(self, queries, *, distribution=False, top_k=None):
        lp = np.log(np.array([[0.6, 0.2, 0.1, 0.1]] * len(queries), dtype=np.float32))
        opt = lp[:, :2].copy()
        return BatchOutput(opt, np.exp(opt).sum(1), lp if distribution else None)

    def vision_features(self, images):
        return np.stack([im.mean(axis=(0, 1)) for im in images])


def test_degraded_backend_sharpens_and_damps():
    image = np.zeros((4, 4, 3), np.uint8)
    image[:2] = 200
    damped = damp_image(image, 0.5)
    assert damped.mean() == pytest.approx(image.mean(), abs=1)
    assert np.ptp(damped) == pytest.approx(np.ptp(image) / 2, abs=1)

    inner = _Fixed()
    wrapped = DegradedBackend(inner, damp=0.5, sharpen=2.0)
    assert wrapped.name == inner.name and wrapped.fingerprint != inner.fingerprint
    out = wrapped.forward([Query(image, "q", ("a", "b"))], distribution=True, top_k=2)
    assert np.exp(out.logprobs).sum() == pytest.approx(1.0, abs=1e-5)
    p = np.exp(out.option_logits[0])
    assert p[0] / p[1] == pytest.approx(9.0, rel=1e-4)  # (0.6 / 0.2) ** 2
    assert out.top_ids[0].tolist() == [0, 1]
    assert wrapped.vision_features([image])[0] == pytest.approx(inner.vision_features([damped])[0])
    with pytest.raises(ValueError, match="damp must be in"):
        DegradedBackend(inner, damp=2.0)


def test_default_paths_point_into_the_repository():
    assert Path(DEFAULT_DATASET).parent.name == "fixtures"
