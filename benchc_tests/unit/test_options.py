"""The option table (``benchc.suite.options``) is the one declaration of every benchc option:
the command line, ``SuiteConfig`` and the docs site's options reference all follow it."""

from __future__ import annotations

import argparse
import importlib.util
import re
from dataclasses import fields
from pathlib import Path

import pytest

from benchc import spec
from benchc.suite.config import ConfigError, SuiteConfig
from benchc.suite.options import OPTIONS, add_options, default_of

DOCS = Path(__file__).resolve().parents[2] / "docs"

#: A command-line value for every option (None: a switch) and the SuiteConfig field it gives,
#: each unlike the default; ``rootdir`` stands for the rootdir the paths resolve against.
EXAMPLES = {
    "--model": ("org/name", "org/name"),
    "--model-args": ("max_pixels=401408", {"max_pixels": 401408}),
    "--revision": ("v1", "v1"),
    "--trust-remote-code": (None, True),
    "--dataset": ("data", "rootdir/data"),
    "--dataset-args": ("options=A|B,answer=label", {"options": "A|B", "answer": "label"}),
    "--corruptions": ("blur", spec.FAMILIES["blur"]),
    "--severities": ("2-3", (2, 3)),
    "--image-size": ("224", 224),
    "--batch-size": ("4", 4),
    "--device": ("cpu", "cpu"),
    "--dtype": ("bfloat16", "bfloat16"),
    "--progress": ("log", "log"),
    "--seed": ("7", 7),
    "--results-dir": ("res", "rootdir/res"),
    "--cache-dir": ("/abs/cache", Path("/abs/cache")),
    "--thresholds-dir": ("snap", "rootdir/snap"),
    "--report": ("out", "rootdir/out"),
    "--per-sample": (None, True),
    "--region-locator": ("foreground", "foreground"),
    "--vsi-support": ("full", "full"),
    "--lenient": (None, True),
    "--allow-outside-root": (None, True),
    "--lock-timeout": ("2.5", 2.5),
    "--vsi-dataset": ("org/vsi", "org/vsi"),
    "--false-alarm-budget": ("0.05", 0.05),
    "--strict-gates": (None, True),
    "--inconclusive": ("fail", "fail"),
    "--log-samples": (None, True),
    "--wandb": ("proj", "proj"),
    "--mlflow": ("exp", "exp"),
    "--push-to-hub": ("org/reports", "org/reports"),
    "--export": ("mlflow=exp,wandb=proj", (("mlflow", "exp"), ("wandb", "proj"))),
    "--executor": ("ray", "ray"),
    "--ray-address": ("ray://head:10001", "ray://head:10001"),
    "--ray-actors": ("4", 4),
    "--ray-gpus": ("2", 2),
    "--from-store": ("s3://bucket/benchc", "s3://bucket/benchc"),
    "--baseline": ("release-1", "release-1"),
    "--limit": ("8", 8),
    "--looks": ("3", 3),
    "--look": ("2", 2),
    "--benchc-degrade": ("damp=0.3", {"damp": 0.3}),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_options(parser.add_argument)
    return parser


def _gen_reference():
    spec_ = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def test_the_reference_pages_are_generated_from_the_declarations():
    # docs/reference/*.md is what `python docs/gen_reference.py` writes from the code
    assert _gen_reference().stale() == [], "run: python docs/gen_reference.py"


def test_the_options_reference_lists_exactly_the_declared_options():
    text = (DOCS / "reference" / "options.md").read_text(encoding="utf-8")
    table = text[text.index("| option | meaning |") :].split("\n\n", 1)[0]
    rows = [line.split("|")[1] for line in table.splitlines()[2:]]
    listed = [flag for row in rows for flag in re.findall(r"`(--[a-z][a-z-]*)", row)]
    # syrupy's --snapshot-update records benchc's baselines: the reference documents it too
    declared = [opt.flag for opt in OPTIONS if not opt.hidden] + ["--snapshot-update"]
    declared += [opt.namespaced for opt in OPTIONS if not opt.hidden and opt.short]
    assert sorted(listed) == sorted(declared)
    assert len(listed) == len(set(listed))


#: What an option's example needs beside it to be valid (a look of a sequential design).
COMPANIONS = {"--look": ["--looks=3"]}


def test_every_option_has_an_example():
    assert sorted(EXAMPLES) == sorted(opt.flag for opt in OPTIONS)


def ray_installed(monkeypatch, installed: bool) -> None:
    """Ray as found (or not) by ``--executor``'s check: the default run's environment has no
    Ray (the ``benchc[ray]`` extra is the cluster tests' own line in .ci/run)."""
    import importlib.util

    real = importlib.util.find_spec
    spec = real("json") if installed else None  # any spec stands for an installed package
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: spec if name == "ray" else real(name, *a)
    )


@pytest.mark.parametrize("opt", OPTIONS, ids=lambda opt: opt.flag)
def test_every_option_round_trips_into_the_config(opt, tmp_path, monkeypatch):
    ray_installed(monkeypatch, True)
    (tmp_path / "data").mkdir()
    text, want = EXAMPLES[opt.flag]
    args = [opt.flag] if text is None else [f"{opt.flag}={text}"]
    args += COMPANIONS.get(opt.flag, [])
    cfg = SuiteConfig.from_options(vars(_parser().parse_args(args)).get, rootdir=tmp_path)
    value = getattr(cfg, opt.field)
    if isinstance(want, str) and want.startswith("rootdir/"):
        want = tmp_path / want.removeprefix("rootdir/")
        value = Path(value)
    assert value == want
    assert value != getattr(SuiteConfig(), opt.field)


def test_nothing_given_is_the_declared_defaults(tmp_path):
    from_cli = SuiteConfig.from_options(vars(_parser().parse_args([])).get, rootdir=tmp_path)
    from_python = SuiteConfig.from_options({}.get, rootdir=tmp_path)
    assert from_cli == from_python
    plain = SuiteConfig()
    for f in fields(SuiteConfig):
        if f.name in ("results_dir", "thresholds_dir"):  # resolved against the rootdir
            assert getattr(from_cli, f.name) == tmp_path / getattr(plain, f.name)
        else:
            assert getattr(from_cli, f.name) == getattr(plain, f.name), f.name
    assert plain.seed == spec.DEFAULT_SEED and plain.corruptions == spec.CORRUPTIONS
    assert default_of("false_alarm_budget") == 0.01


def test_environment_variables_are_the_ones_read():
    from benchc.corruptions.cache import CACHE_ENV
    from benchc.results.lock import LOCK_TIMEOUT_ENV

    envs = {opt.flag: opt.env for opt in OPTIONS if opt.env}
    assert envs == {
        "--cache-dir": CACHE_ENV,
        "--lock-timeout": LOCK_TIMEOUT_ENV,
        "--ray-address": "RAY_ADDRESS",  # read by ray.init itself
    }
    for opt in OPTIONS:
        if opt.env:
            assert f"${opt.env}" in opt.help


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--seed=-1"], "argument --seed: must be an integer in 0..2**63-1, got -1"),
        (["--image-size=x"], "argument --image-size: invalid int value: 'x'"),
        (["--corruptions=fgo"], "argument --corruptions: unknown corruption or family 'fgo'"),
        (["--severities=6"], "argument --severities: 6 is outside 1..5"),
        (["--executor=dask"], "argument --executor: must be one of local, ray, got 'dask'"),
    ],
)
def test_bad_values_fail_at_parse_time(args, says):
    with pytest.raises(argparse.ArgumentError) as info:
        _parser().parse_args(args)
    assert str(info.value).startswith(says)


def test_executor_ray_without_ray_names_the_extra(monkeypatch):
    ray_installed(monkeypatch, False)
    with pytest.raises(argparse.ArgumentError) as info:
        _parser().parse_args(["--executor=ray"])
    says = 'argument --executor: ray needs Ray installed: pip install "benchc[ray]"'
    assert str(info.value) == says


def test_from_store_computes_nothing_so_not_with_the_ray_executor(tmp_path, monkeypatch):
    ray_installed(monkeypatch, True)
    args = vars(_parser().parse_args(["--from-store=store", "--executor=ray"]))
    with pytest.raises(ConfigError, match="--from-store computes nothing: it cannot go with"):
        SuiteConfig.from_options(args.get, rootdir=tmp_path)
    args = vars(_parser().parse_args(["--from-store=store"]))
    assert SuiteConfig.from_options(args.get, rootdir=tmp_path).from_store == str(
        tmp_path / "store"
    )


def test_help_is_the_declared_one():
    text = " ".join(_parser().format_help().split())  # unwrapped
    assert "(default 0)" in text and "(default 0.01)" in text and "(default thresholds/)" in text
    assert "--benchc-degrade" not in text


def test_metavars_name_the_value_not_an_environment_variable():
    """argparse's default metavar is the dest in capitals (``--seed=BENCHC_SEED``), which reads
    like an environment variable; every option that takes a value names its own."""
    help_text = _parser().format_help()
    assert not re.search(r"--[a-z-]+[ =]BENCHC_", help_text)
    assert "--seed N" in help_text and "--limit N" in help_text


def test_snapshot_update_is_explained_in_the_benchc_group(pytester):
    """``--snapshot-update`` is syrupy's option (its help line is syrupy's: benchc rewrites no
    other plugin's declaration); the benchc group's heading says what it does in a benchc run."""
    pytester.makeconftest('pytest_plugins = ["benchc.plugin"]\n')
    out = pytester.runpytest_inprocess("--help").stdout.str()
    text = " ".join(out[out.index("benchc structural-robustness suite") :].split()[:60])
    assert "--snapshot-update records the baseline" in text, text
