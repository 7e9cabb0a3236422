"""The default run's warm-up process (benchc.testing.dev.warmup): which runs get one, the suite
moved last, and what it stores being exactly what a serial run stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchc.results import load_npz
from benchc.testing.dev import warmup
from benchc_tests.unit.suite_project import make_suite_project

pytest_plugins = ["pytester"]

UNIT = "def test_unit():\n    assert True\n"


@pytest.fixture
def items(pytester: pytest.Pytester) -> list[pytest.Item]:
    """A unit test and the suite's real cases, collected as the default run collects them."""
    make_suite_project(pytester)
    pytester.makepyfile(test_a_unit=UNIT)
    got, _ = pytester.inline_genitems("--corruptions=fog", "--severities=1", "-p", "no:randomly")
    return got


def test_only_a_run_mixing_the_suite_with_other_tests_warms_up(items, monkeypatch):
    from benchc.suite.collect import is_suite_item

    suite = [i for i in items if is_suite_item(i)]
    unit = [i for i in items if not is_suite_item(i)]
    assert len(unit) == 1 and len(suite) >= 1 + 1 + 6 + 2  # cell, family, model, vsi, ...
    plain = {"collect_only": False, "update": False, "parallel": False}
    monkeypatch.delenv(warmup.WARMUP_ENV, raising=False)  # whatever the outer run was told
    assert warmup.wanted(items, **plain)
    assert not warmup.wanted(suite, **plain)  # the suite alone: the plain serial run
    assert not warmup.wanted(unit, **plain)
    for fact in plain:
        assert not warmup.wanted(items, **{**plain, fact: True})
    monkeypatch.setenv(warmup.WARMUP_ENV, "0")
    assert not warmup.wanted(items, **plain)


def test_the_suite_goes_last_each_group_in_its_own_order(items):
    from benchc.suite.collect import is_suite_item

    mixed = [items[-1], *items[:-1]]  # the unit test (collected last: test_a_unit < suite/)
    ordered = warmup.suite_last(mixed)
    assert sorted(map(id, ordered)) == sorted(map(id, mixed))
    assert not is_suite_item(ordered[0]) and all(is_suite_item(i) for i in ordered[1:])
    assert ordered[1:] == [i for i in mixed if is_suite_item(i)]


def _stored(results: Path) -> dict[str, dict[str, np.ndarray]]:
    return {p.name: load_npz(p) for p in sorted(results.glob("*/*/*.npz"))}


@pytest.mark.slow  # a child process loading torch and the model, then the serial run (~10 s)
def test_the_warm_up_process_stores_what_a_serial_run_stores(tmp_path):
    """Cache entries and stored arrays (conditions and VSI) of the child process are
    byte-identical to one process computing them in the suite's order."""
    from benchc import spec
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate
    from benchc.suite.config import SuiteConfig
    from benchc.suite.session import SuiteSession
    from benchc.suite.vsi import vsi_arrays

    data = tmp_path / "data"
    save_jsonl(generate(6, 7), data)
    conditions = ("fog-1", "pixelate-2")

    def cfg(side: str) -> SuiteConfig:
        return SuiteConfig(
            dataset=str(data),
            corruptions=("fog", "pixelate"),
            severities=(1, 2),
            image_size=64,
            batch_size=4,
            results_dir=tmp_path / side / "results",
            cache_dir=tmp_path / side / "cache",
        )

    proc, log = warmup.start(warmup.Plan(cfg("child"), conditions, vsi=True))
    assert proc.wait(timeout=300) == 0, log.read_text()
    assert warmup.finish(proc, log) is None and not log.exists()

    state = SuiteSession(cfg("serial"))
    for key in (spec.CLEAN, *conditions):
        state.run.condition(key)
    vsi_arrays(state.vsi_run)

    child, serial = (
        _stored(tmp_path / "child" / "results"),
        _stored(tmp_path / "serial" / "results"),
    )
    names = {"clean.npz", "fog-1.npz", "pixelate-2.npz", "vsi-aligned.npz"}
    assert set(child) == set(serial) >= names
    for name, arrays in serial.items():
        assert child[name].keys() == arrays.keys(), name
        for key, value in arrays.items():
            assert child[name][key].tobytes() == value.tobytes(), (name, key)
    caches = [sorted((tmp_path / s / "cache").rglob("*.png")) for s in ("child", "serial")]
    # each sample's corruptions, and its VSI region and whole-image blurs (cached alike)
    assert len(caches[0]) == 6 * len(conditions) + 2 * 6
    assert [p.name for p in caches[0]] == [p.name for p in caches[1]]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(*caches, strict=True))


@pytest.mark.slow  # a pytest run whose warm-up child fails (~3 s)
def test_a_failed_warm_up_is_reported_and_its_log_kept(tmp_path):
    """A child that fails leaves a note naming its log (the suite's cases then compute
    their results themselves)."""
    from benchc.suite.config import SuiteConfig

    bad = SuiteConfig(dataset=str(tmp_path / "missing"), results_dir=tmp_path / "results")
    proc, log = warmup.start(warmup.Plan(bad, ("fog-1",), vsi=False))
    proc.wait(timeout=120)
    note = warmup.finish(proc, log)
    assert note is not None and f"log {log}" in note and "computed their results" in note
    assert "missing" in log.read_text()
    log.unlink()
