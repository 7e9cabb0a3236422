"""Every benchc command-line option, declared once: flag, config field, converter, default, help.

Both ``pytest_addoption`` (:func:`add_options`) and ``SuiteConfig.from_options``
(:func:`config_values`) are generated from :data:`OPTIONS`, so a default or a check cannot
differ between them. A value that is wrong on its own fails while pytest parses the command line
(argparse ``type=``): one usage error naming the option and the value, before any hook runs.
What needs the rootdir, another option or the test's import path (paths, ``--model``,
``--model-args``, a ``module:callable`` region locator) is settled in ``from_options`` instead.
"""

from __future__ import annotations

import os
from argparse import SUPPRESS, ArgumentTypeError
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchc import spec

#: The repository's ``fixtures/`` (the embedded tiny model and testbed live there).
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
DEFAULT_MODEL = str(FIXTURES / "tiny-vlm")
DEFAULT_DATASET = str(FIXTURES / "testbed")
#: The VSI gates' own embedded set (two forward passes a sample, no grid: it can be large). Like
#: the testbed it runs at its native 128 px: at 448 px the sigma-20 blur costs 5x the CPU time.
DEFAULT_VSI_DATASET = str(FIXTURES / "vsi-set")


class ConfigError(ValueError):
    """An invalid benchc option; the plugin turns it into a ``pytest.UsageError``."""


def parse_corruptions(text: str | None) -> tuple[str, ...]:
    """``"all"``/None, or a comma list of corruption names and family names (``blur,fog``)."""
    if text is None or text.strip() in ("", "all"):
        return spec.CORRUPTIONS
    chosen: list[str] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        names = spec.FAMILIES.get(item, (item,))
        for name in names:
            if name not in spec.CORRUPTIONS:
                raise ConfigError(
                    f"--corruptions: unknown corruption or family {item!r}; choose from "
                    f"{', '.join(spec.FAMILIES)} or {', '.join(spec.CORRUPTIONS)}"
                )
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise ConfigError("--corruptions selects nothing")
    return tuple(c for c in spec.CORRUPTIONS if c in chosen)  # canonical order


def parse_severities(text: str | None) -> tuple[int, ...]:
    """``"all"``/None, ``"1,3,5"`` or a range ``"2-4"``."""
    if text is None or text.strip() in ("", "all"):
        return spec.SEVERITIES
    chosen: set[int] = set()
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        lo, sep, hi = item.partition("-")
        try:
            values = range(int(lo), int(hi) + 1) if sep else [int(lo)]
        except ValueError:
            raise ConfigError(f"--severities: {item!r} is not a severity or range") from None
        for v in values:
            if v not in spec.SEVERITIES:
                raise ConfigError(f"--severities: {v} is outside 1..5")
            chosen.add(v)
    if not chosen:
        raise ConfigError("--severities selects nothing")
    return tuple(sorted(chosen))


def parse_degrade(text: str | None) -> dict[str, float]:
    """``"damp=0.3,sharpen=3"`` (a hidden option used by the suite's own tests): the knobs of
    the ``degrade`` backend wrapper :mod:`benchc.testing` registers (``benchc.wrappers``)."""
    if not text:
        return {}
    from benchc.registry import WRAPPERS

    KNOBS = WRAPPERS.load("degrade").KNOBS
    out: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in KNOBS:
            raise ConfigError(f"--benchc-degrade: expected {'|'.join(KNOBS)}=<x>, got {item!r}")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ConfigError(f"--benchc-degrade: {item!r} is not a number") from None
    return out


def _dataset_args(text: str) -> dict[str, str]:
    """``--dataset-args``: ``field=column,...`` (:func:`benchc.data.hf.parse_columns`)."""
    from benchc.data.hf import parse_columns

    return parse_columns(text)


def _number(kind: type, bad: Callable[[Any], bool], rule: str) -> Callable[[str], Any]:
    """A ``type=`` converter: ``kind(text)``, refused when ``bad`` (the message names the value)."""

    def convert(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if bad(value):
            raise ArgumentTypeError(f"{rule}, got {value}")
        return value

    return convert


def _choice(allowed: tuple[str, ...]) -> Callable[[str], str]:
    """A ``type=`` converter accepting one of ``allowed`` (the message lists them)."""

    def convert(text: str) -> str:
        if text not in allowed:
            raise ArgumentTypeError(f"must be one of {', '.join(allowed)}, got {text!r}")
        return text

    return convert


# -- what ``from_options`` settles once every option is known ----------------------------------
#: ``finish(value, given, rootdir)``: ``given`` holds every option's value before finishing.
Finish = Callable[[Any, Mapping[str, Any], Path], Any]


def _local_or_id(value: str, rootdir: Path) -> str:
    """A relative path that exists under ``rootdir`` becomes absolute; a hub id stays as is.
    A Hub-style folder's ``:config:split`` suffix stays on the absolute path."""
    p = Path(os.path.expanduser(value))
    if p.is_absolute():
        return str(p)
    if (rootdir / p).exists():
        return str(rootdir / p)
    head, sep, suffix = value.partition(":")
    if sep and (rootdir / head).is_dir():
        return f"{rootdir / head}:{suffix}"
    return value


def _model_args(text: str | None, model: str) -> dict[str, Any]:
    from benchc.models.registry import parse_model_args

    try:
        return parse_model_args(text, model)
    except ValueError as exc:
        raise ConfigError(f"--model-args: {exc}") from None


def _path(value: Any, given: Mapping[str, Any], rootdir: Path) -> Path | None:
    """Relative to ``rootdir`` (so every xdist worker agrees), ``~`` expanded."""
    if value is None:
        return None
    p = Path(os.path.expanduser(str(value)))
    return p if p.is_absolute() else rootdir / p


def _source(value: Any, given: Mapping[str, Any], rootdir: Path) -> str | None:
    """A dataset or model: a folder under ``rootdir`` made absolute, a hub id kept."""
    return _local_or_id(value, rootdir) if value else None


def _args_of_model(value: Any, given: Mapping[str, Any], rootdir: Path) -> dict[str, Any]:
    return _model_args(value, given["model"])  # the schema depends on the backend --model picks


def _baseline(value: Any, given: Mapping[str, Any], rootdir: Path) -> str | None:
    """A name stays a name; a path (it has a separator, or is a folder under ``rootdir`` that
    is not a baseline of --thresholds-dir) becomes absolute (:mod:`benchc.gates.baselines`)."""
    if not value:
        return None
    from benchc.gates.baselines import normalise  # benchc.gates loads scipy and sklearn: ~4 s

    try:
        return normalise(str(value), _path(given["thresholds_dir"], given, rootdir), rootdir)
    except ValueError as exc:
        raise ConfigError(f"--baseline: {exc}") from None


def _locator(value: Any, given: Mapping[str, Any], rootdir: Path) -> str:
    """Checked here, not at parse time: ``module:callable`` may need the conftest's sys.path."""
    from benchc.corruptions.locate import resolve_locator

    try:
        resolve_locator(value)
    except ValueError as exc:
        raise ConfigError(f"--region-locator: {exc}") from None
    return value


def _executor(text: str) -> str:
    """An executor of the registry (``benchc.executors``; ``stored`` is ``--from-store``'s),
    available here (``ray``: Ray installed; one line naming the extra)."""
    from benchc.registry import EXECUTORS

    names = [n for n in EXECUTORS.names() if n != "stored"]
    if not names:  # benchc's own entry points missing: not installed
        raise ArgumentTypeError(EXECUTORS.unknown(text))
    if text not in names:
        raise ArgumentTypeError(f"must be one of {', '.join(names)}, got {text!r}")
    problem = getattr(EXECUTORS.load(text), "unavailable", lambda: None)()
    if problem:
        raise ArgumentTypeError(problem)
    return text


def _exports(text: str) -> tuple[tuple[str, str], ...]:
    """``--export``: ``<name>=<target>,...``, each name an exporter of the registry
    (``benchc.exporters``)."""
    from benchc.registry import EXPORTERS

    out = []
    for item in filter(None, (i.strip() for i in text.split(","))):
        name, sep, target = item.partition("=")
        if not sep or not target:
            raise ArgumentTypeError(f"expected <exporter>=<target>, got {item!r}")
        if name not in EXPORTERS:
            raise ArgumentTypeError(EXPORTERS.unknown(name))
        out.append((name, target))
    return tuple(out)


def _store_location(value: Any, given: Mapping[str, Any], rootdir: Path) -> str | None:
    """A URL stays as is; a folder becomes absolute. Not with --executor=ray (that computes)."""
    if not value:
        return None
    if given["executor"] != "local":
        raise ConfigError("--from-store computes nothing: it cannot go with --executor=ray")
    return str(value) if "://" in str(value) else str(_path(value, given, rootdir))


def _within_looks(value: Any, given: Mapping[str, Any], rootdir: Path) -> int:
    """``--look`` names one of ``--looks``: a look past the last has no budget left to spend."""
    looks = given["looks"] or 1
    if value > looks:
        raise ConfigError(
            f"--look={value} with --looks={looks}: a sequential gate has no look after "
            "its last (its false-alarm budget is spent); the last look's verdict stands"
        )
    return value


@dataclass(frozen=True)
class Option:
    """One command-line option and the ``SuiteConfig`` field it fills (dest ``benchc_<field>``)."""

    flag: str
    field: str
    help: str
    #: The value when the option is not given (None where it is resolved later, see ``help``).
    default: Any = None
    #: Converts (and checks) a command-line string; raises ``ArgumentTypeError``/``ValueError``.
    type: Callable[[str], Any] | None = None
    metavar: str | None = None
    switch: bool = False  # a store_true flag
    #: The environment variable consulted where the value is resolved, when not given.
    env: str | None = None
    finish: Finish | None = None
    #: An empty value means the default (``--model=`` is the embedded model).
    blank_is_default: bool = False
    hidden: bool = False
    #: Printed in every command the run prints, so a printed command continues this run: the
    #: settings that decide comparability with a baseline, and where the run reads and writes.
    carried: bool = False
    #: How a gate run gates and exits: printed in a gate run's commands (never a recording's).
    policy: bool = False
    #: ``benchc plan`` takes it: the grid and budget a plan is made for.
    plan: bool = False
    #: How a value prints back on a command line (None: as ``str``; a switch prints its flag).
    text: Callable[[Any], str] | None = None
    #: The configuration's value when the option is not given, where that is not
    #: :attr:`default` (a factory: ``dict`` for arguments parsed into a mapping).
    empty: Callable[[], Any] | None = None

    @property
    def dest(self) -> str:
        return f"benchc_{self.field}"

    @property
    def namespaced(self) -> str:
        """``--benchc-<name>``: always declared, so it can never clash with another plugin's or
        a repository's own option (syrupy's ``--snapshot-*``, pytest-benchmark's
        ``--benchmark-*`` do the same)."""
        name = self.flag[2:]
        return self.flag if name.startswith("benchc-") else f"--benchc-{name}"

    @property
    def short(self) -> str | None:
        """The documented short form (``--model``), declared only where it is free
        (:func:`benchc.suite.shortforms.add_short_forms`)."""
        return None if self.flag == self.namespaced else self.flag

    def convert(self, text: str) -> Any:
        """The argparse ``type=``: every refusal becomes ``argument --flag: <why, value>``."""
        assert self.type is not None
        try:
            return self.type(text)
        except ArgumentTypeError:
            raise
        except ValueError as exc:  # the shared parsers' ConfigError names the flag already
            message = str(exc)
            if message.startswith(self.flag):
                message = message[len(self.flag) :].lstrip(": ")
            raise ArgumentTypeError(message) from None

    def add_to(self, addoption: Callable[..., Any], *flags: str, shown: bool = True) -> None:
        """Declare ``flags`` (default: both forms) on a pytest option group (or an ``argparse``
        parser's ``add_argument``). The argparse default is None, so "not given" is visible
        (:func:`given_explicitly`); :meth:`given` supplies the real default."""
        flags = flags or tuple(f for f in (self.short, self.namespaced) if f)
        help_text = self.help.replace("%(default)s", str(self.default).replace("%", "%%"))
        help_text = help_text if shown and not self.hidden else SUPPRESS
        kwargs: dict[str, Any] = {"dest": self.dest, "help": help_text}
        if self.switch:
            kwargs["action"] = "store_true"
        else:
            kwargs["default"] = None
            if self.type is not None:
                kwargs["type"] = self.convert
            if self.metavar is not None:
                kwargs["metavar"] = self.metavar
        addoption(*flags, **kwargs)

    def is_default(self, value: Any) -> bool:
        """``value`` is what the run gets without this option (a folder: the same folder)."""
        default = self.given(lambda dest: None)
        value = tuple(value) if isinstance(value, list) else value
        if value is None or value == default:
            return True
        paths = isinstance(default, (str, Path)) and isinstance(value, (str, Path))
        if paths and self.finish is _path:
            return Path(value).resolve() == (Path.cwd() / default).resolve()
        return False

    def to_args(self, value: Any) -> list[str]:
        """``value`` as this option's command-line argument (none at its default)."""
        if self.is_default(value) or value is False or value in ({}, ()):
            return []
        if self.switch:
            return [self.flag]
        return [f"{self.flag}={self.text(value) if self.text is not None else value}"]

    def given(self, get: Callable[[str], Any]) -> Any:
        """The value from ``get(dest)`` (None: not given): defaulted, and converted when it is a
        string (what argparse does with a string default or a command-line value)."""
        value = get(self.dest)
        if value is None or (self.blank_is_default and not value):
            value = self.default
        if self.switch:
            return bool(value)
        if isinstance(value, str) and self.type is not None:
            try:
                return self.convert(value)
            except ArgumentTypeError as exc:
                raise ConfigError(f"{self.flag}: {exc}") from None
        return value


def _args_text(args: Mapping[str, Any]) -> str:
    """``--model-args`` as given: ``k=v,...`` (a JSON object for ``extra_body``)."""
    import json

    return ",".join(
        f"{k}={json.dumps(v) if isinstance(v, dict | list) else v}" for k, v in args.items()
    )


def _pairs_text(pairs: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in pairs.items())


def _list_text(items: Any) -> str:
    return ",".join(map(str, items))


def _knobs_text(knobs: Mapping[str, float]) -> str:
    return ",".join(f"{k}={v:g}" for k, v in knobs.items())


OPTIONS: tuple[Option, ...] = (
    Option(
        "--model",
        "model",
        "model under test: hub id or checkpoint folder (default: fixtures/tiny-vlm)",
        default=DEFAULT_MODEL,
        metavar="ID_OR_DIR",
        blank_is_default=True,
        finish=_source,
        carried=True,
    ),
    Option(
        "--model-args",
        "model_args",
        "backend arguments, lm-eval style: device_map=auto,attn_implementation=sdpa,"
        "max_pixels=401408 (hf); concurrency=8,rate_limit=5,top_logprobs=20 (openai)",
        metavar="K=V,...",
        finish=_args_of_model,
        empty=dict,
        carried=True,
        text=_args_text,
    ),
    Option("--revision", "revision", "hub revision of --model", metavar="REV", carried=True),
    Option(
        "--trust-remote-code",
        "trust_remote_code",
        "allow the model's own code from the hub",
        switch=True,
    ),
    Option(
        "--dataset",
        "dataset",
        "dataset folder or file, or a Hub dataset id org/name[:config[:split]] "
        "(default: fixtures/testbed)",
        default=DEFAULT_DATASET,
        metavar="PATH",
        blank_is_default=True,
        finish=_source,
        carried=True,
    ),
    Option(
        "--dataset-args",
        "dataset_args",
        "column mapping of a Hugging Face / Hub dataset: field=column,... e.g. "
        "question=prompt,options=A|B|C|D,answer=label (docs/guides/datasets.md)",
        default="",
        type=_dataset_args,
        metavar="F=COL,...",
        carried=True,
        text=_pairs_text,
    ),
    Option(
        "--corruptions",
        "corruptions",
        "comma list of corruptions and/or families (noise,blur,...); default all 19",
        default=spec.CORRUPTIONS,
        type=parse_corruptions,
        metavar="LIST",
        carried=True,
        plan=True,
        text=_list_text,
    ),
    Option(
        "--severities",
        "severities",
        "comma list or range of severities, e.g. 1,3,5 or 2-4; default 1-5",
        default=spec.SEVERITIES,
        type=parse_severities,
        metavar="LIST",
        carried=True,
        plan=True,
        text=_list_text,
    ),
    Option(
        "--image-size",
        "image_size",
        "longer image side before corruption (default: native for the embedded testbed, else "
        f"{spec.DEFAULT_IMAGE_SIZE})",
        type=_number(int, lambda n: n < 32, "must be >= 32 px"),
        metavar="PX",
        carried=True,
    ),
    Option(
        "--batch-size",
        "batch_size",
        "queries per forward pass (default: the backend's)",
        type=_number(int, lambda n: n < 1, "must be >= 1"),
        metavar="N",
    ),
    Option(
        "--device",
        "device",
        "auto (GPU when present, one per xdist worker), cpu, cuda, cuda:1, ...",
        default="auto",
        metavar="DEVICE",
        blank_is_default=True,
    ),
    Option("--dtype", "dtype", "float32, bfloat16, float16", metavar="DTYPE", carried=True),
    Option(
        "--progress",
        "progress",
        "progress of long runs (queries done/total, queries/s, ETA): auto (a bar on a "
        "terminal, a line every 30 s in CI logs, xdist workers and under -q, none under -qq), "
        "bar, log, off (default %(default)s)",
        default="auto",
        type=_choice(("auto", "bar", "log", "off")),
        metavar="{auto,bar,log,off}",
    ),
    Option(
        "--seed",
        "seed",
        "seed of corruptions and bootstrap (default %(default)s)",
        default=spec.DEFAULT_SEED,
        type=_number(int, lambda n: not 0 <= n < 2**63, "must be an integer in 0..2**63-1"),
        metavar="N",
        carried=True,
    ),
    Option(
        "--results-dir",
        "results_dir",
        "resumable results store (default %(default)s)",
        default=Path(".benchc/results"),
        metavar="DIR",
        finish=_path,
        carried=True,
    ),
    Option(
        "--cache-dir",
        "cache_dir",
        "corruption cache (default $BENCHC_CACHE_DIR, else $XDG_CACHE_HOME/benchc/corruptions, "
        "else ~/.cache/benchc/corruptions)",
        metavar="DIR",
        env="BENCHC_CACHE_DIR",
        finish=_path,
        carried=True,
    ),
    Option(
        "--thresholds-dir",
        "thresholds_dir",
        "threshold snapshots, one folder per baseline (default %(default)s/)",
        default=Path("thresholds"),
        metavar="DIR",
        finish=_path,
        carried=True,
    ),
    Option(
        "--baseline",
        "baseline",
        "the recorded baseline to gate against (or, with --snapshot-update, to record): a "
        "name inside --thresholds-dir or a folder path (default: the model's own name)",
        metavar="NAME_OR_DIR",
        finish=_baseline,
        carried=True,
    ),
    Option(
        "--limit",
        "limit",
        "smoke run: only the dataset's first N samples; the gates compare them with the "
        "same samples of the baseline",
        type=_number(int, lambda n: n < 1, "must be >= 1"),
        metavar="N",
        carried=True,
        plan=True,
    ),
    Option(
        "--looks",
        "looks",
        "a sequential gate of at most K looks at a growing --limit: the false-alarm budget is "
        "spent evenly over them, so an UNRESOLVED look extends to more of the dataset's samples "
        "(its summary prints the next look's command); default %(default)s",
        default=1,
        type=_number(int, lambda n: n < 1, "must be >= 1"),
        metavar="K",
        policy=True,
        plan=True,
    ),
    Option(
        "--look",
        "look",
        "which look of --looks this run is (the printed next-look command sets it); "
        "default %(default)s",
        default=1,
        type=_number(int, lambda n: n < 1, "must be >= 1"),
        metavar="k",
        policy=True,
        finish=_within_looks,
    ),
    Option(
        "--report",
        "report",
        "write DIR/report.html (self-contained) and DIR/report.json at the end of the run",
        metavar="DIR",
        finish=_path,
    ),
    Option(
        "--per-sample",
        "per_sample",
        "add corruption x severity x sample drill-down cases",
        switch=True,
    ),
    Option(
        "--region-locator",
        "region_locator",
        "VSI region for samples without one: none (blur the whole image), foreground, "
        "or module:callable",
        default="none",
        metavar="NAME",
        blank_is_default=True,
        finish=_locator,
        carried=True,
    ),
    Option(
        "--vsi-support",
        "vsi_support",
        "which VSI the VSI gates read: top50 (KL on the union of both top-50 supports, the VSI "
        "paper's reported numbers) or full (the whole vocabulary); both are reported "
        "(default %(default)s)",
        default=spec.VSI_SUPPORT,
        type=_choice(spec.VSI_SUPPORTS),
        metavar="{" + ",".join(spec.VSI_SUPPORTS) + "}",
        carried=True,
    ),
    Option(
        "--lenient",
        "lenient",
        "skip bad dataset samples (counted in the summary) instead of a usage error",
        switch=True,
        carried=True,
    ),
    Option(
        "--allow-outside-root",
        "allow_outside_root",
        "let dataset image/mask paths point outside the dataset folder (shared folders)",
        switch=True,
        carried=True,
    ),
    Option(
        "--lock-timeout",
        "lock_timeout",
        "seconds to wait for a results lock held by another host (default "
        "$BENCHC_LOCK_TIMEOUT or 600)",
        type=_number(float, lambda s: s < 0, "must be >= 0 seconds"),
        metavar="S",
        env="BENCHC_LOCK_TIMEOUT",
    ),
    Option(
        "--vsi-dataset",
        "vsi_dataset",
        "dataset of the VSI gates (default: fixtures/vsi-set with the embedded testbed, "
        "else --dataset)",
        metavar="PATH",
        finish=_source,
        carried=True,
    ),
    Option(
        "--false-alarm-budget",
        "false_alarm_budget",
        "probability that any gate fails when nothing changed; split over the gates that "
        "run into each gate's z (default %(default)s)",
        default=0.01,
        type=_number(float, lambda p: not 0.0 < p < 1.0, "must be in (0, 1)"),
        metavar="P",
        policy=True,
        plan=True,
    ),
    Option(
        "--strict-gates",
        "strict_gates",
        "a gate that cannot be checked, or whose change it cannot resolve (UNRESOLVED), fails "
        "instead of being reported, and an inconclusive run exits 6 (release CI; "
        "--inconclusive=warn opts out of the latter)",
        switch=True,
        policy=True,
    ),
    Option(
        "--inconclusive",
        "inconclusive",
        "what an unresolved or inconclusive verdict (no gate failed, but a change beyond a "
        "gate's minimal detectable regression it could not resolve, gates that cannot fail, a "
        "model not answering, a large ungated change) does: warn (say so, keep the exit code) "
        "or fail (exit status 6); default: fail under --strict-gates, else warn",
        default=None,
        type=_choice(("warn", "fail")),
        metavar="{warn,fail}",
        policy=True,
    ),
    # -- after the run: the per-sample log and the exporters (docs/guides/exporters.md) ------
    Option(
        "--log-samples",
        "log_samples",
        "write sample-log.jsonl (every sample's answer, option probabilities and correctness per "
        "condition, and its VSI) next to the --report, else into the run's results folder",
        switch=True,
    ),
    Option(
        "--wandb",
        "wandb",
        "log verdict, gated figures, environment and report to this W&B project "
        "(benchc[wandb]; WANDB_MODE=offline writes the run files only)",
        metavar="PROJECT",
    ),
    Option(
        "--mlflow",
        "mlflow",
        "log verdict, gated figures, environment and report to this MLflow experiment "
        "(benchc[mlflow]; server from MLFLOW_TRACKING_URI)",
        metavar="EXPERIMENT",
    ),
    Option(
        "--push-to-hub",
        "push_to_hub",
        "upload report, report.json, snapshots and a dataset card to this Hugging Face "
        "dataset repo (benchc[hub]; token from HF_TOKEN)",
        metavar="REPO",
    ),
    Option(
        "--export",
        "export",
        "run these exporters after the run: <name>=<target>,... (any exporter of the "
        "benchc.exporters entry points, a package's own included; docs/guides/extending.md)",
        default="",
        type=_exports,
        metavar="NAME=TARGET",
    ),
    # -- beyond one process (docs/guides/cluster.md) -------------------------------------------
    Option(
        "--executor",
        "executor",
        "where the missing chunks are computed: local (this process, or its xdist workers) or "
        'ray (actors of a Ray cluster, one per model replica; pip install "benchc[ray]") '
        "(default %(default)s)",
        default="local",
        type=_executor,
        metavar="{local,ray}",
    ),
    Option(
        "--ray-address",
        "ray_address",
        "the Ray cluster of --executor=ray (default $RAY_ADDRESS, else a local one started "
        "for the run)",
        metavar="ADDRESS",
        env="RAY_ADDRESS",
    ),
    Option(
        "--ray-actors",
        "ray_actors",
        "model replicas of --executor=ray (default: one per --ray-gpus GPUs the cluster holds, "
        "else its CPUs minus one, left free for retries)",
        type=_number(int, lambda n: n < 1, "must be >= 1"),
        metavar="N",
    ),
    Option(
        "--ray-gpus",
        "ray_gpus",
        "GPUs per model replica under --executor=ray, packed on one node (with "
        "--model-args=device_map=auto beyond 1; default 1 when the cluster has GPUs, else 0)",
        type=_number(int, lambda n: n < 0, "must be >= 0"),
        metavar="K",
    ),
    Option(
        "--from-store",
        "from_store",
        "gate on the results in this store (a folder, or an fsspec URL: s3://, gs://, file://) "
        "computed elsewhere: no model is loaded and nothing is computed; missing chunks are "
        "listed in one error",
        metavar="URL_OR_DIR",
        finish=_store_location,
    ),
    # no knob: "" converts to {} (argparse converts a string default like a given value)
    Option(
        "--benchc-degrade",
        "degrade",
        "",
        default="",
        type=parse_degrade,
        hidden=True,
        carried=True,
        text=_knobs_text,
    ),
)

BY_FIELD: dict[str, Option] = {opt.field: opt for opt in OPTIONS}

#: What syrupy's ``--snapshot-update`` means in a benchc run (the docs' option reference; syrupy
#: owns the flag and its help line).
SNAPSHOT_UPDATE_MEANING = (
    "benchc: record the baseline (--baseline NAME, else the model's own name) from this run's "
    "figures into --thresholds-dir; rules edited in the snapshots survive (also syrupy's "
    "snapshot update)"
)


def add_options(addoption: Callable[..., Any]) -> None:
    """Every option under both its names (an ``argparse`` parser of benchc's own, where no
    other option can clash)."""
    for opt in OPTIONS:
        if opt.short:
            opt.add_to(addoption, opt.short)
        opt.add_to(addoption, opt.namespaced, shown=not opt.short)


def add_namespaced_options(addoption: Callable[..., Any]) -> None:
    """``pytest_addoption``: every option as ``--benchc-<name>`` only (the short forms follow
    once the repository's own options are known)."""
    for opt in OPTIONS:
        opt.add_to(addoption, opt.namespaced)


def given_explicitly(get: Callable[[str], Any]) -> list[str]:
    """The options given on the command line (by their namespaced name)."""
    return [o.namespaced for o in OPTIONS if get(o.dest) not in (None, False)]


def default_of(field: str) -> Any:
    """A ``SuiteConfig`` field's default: its option's, as ``from_options`` would give it."""
    return BY_FIELD[field].given(lambda dest: None)


def config_values(get: Callable[[str], Any], rootdir: Path) -> dict[str, Any]:
    """``SuiteConfig`` keyword arguments from ``config.getoption``-style ``get(dest)``."""
    given = {opt.field: opt.given(get) for opt in OPTIONS}
    return {
        opt.field: opt.finish(given[opt.field], given, rootdir) if opt.finish else given[opt.field]
        for opt in OPTIONS
    }


def suite_args() -> list[str]:
    """How to name the suite from the working directory: this checkout's folder, else the
    installed package (``--pyargs``), so a printed command runs where the run ran."""
    if (Path.cwd() / "benchc_tests" / "suite").is_dir():
        return ["benchc_tests/suite"]
    return ["--pyargs", "benchc_tests.suite"]


def carried(options: tuple[Option, ...] = ()) -> tuple[str, ...]:
    """The fields every printed command carries (:attr:`Option.carried`)."""
    return tuple(o.field for o in options or OPTIONS if o.carried)


def option_args(
    settings: Mapping[str, Any], *, policy: bool = False, options: tuple[Option, ...] = ()
) -> list[str]:
    """``settings`` (field -> value) as command-line arguments, in the table's order: the
    carried settings, and with ``policy`` how a gate run gates; a setting at its default, or
    missing, is left out."""
    out: list[str] = []
    for opt in options or OPTIONS:
        if (opt.carried or (policy and opt.policy)) and opt.field in settings:
            out += opt.to_args(settings[opt.field])
    return out


def suite_command(
    settings: Mapping[str, Any],
    *,
    update: bool = False,
    policy: bool = False,
    extra: tuple[str, ...] = (),
    options: tuple[Option, ...] = (),
) -> str:
    """The suite command of ``settings`` (:func:`option_args`), ``--snapshot-update`` when
    ``update``, then ``extra``."""
    import shlex

    parts = ["pytest", *suite_args(), *option_args(settings, policy=policy, options=options)]
    if update:
        parts.append("--snapshot-update")
    return shlex.join([*parts, *extra])


__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_MODEL",
    "DEFAULT_VSI_DATASET",
    "FIXTURES",
    "OPTIONS",
    "ConfigError",
    "Option",
    "add_namespaced_options",
    "add_options",
    "carried",
    "config_values",
    "default_of",
    "given_explicitly",
    "option_args",
    "parse_corruptions",
    "parse_degrade",
    "parse_severities",
    "suite_args",
    "suite_command",
]
