"""The suite's settings, parsed once from the pytest command line and validated up front.

Every option, its default and its check are declared once, in :mod:`benchc.suite.options`; a bad
value (an unknown corruption, severity 7, a negative batch size) is one usage error naming the
option, before any model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchc import spec
from benchc.gates.states import Policy
from benchc.suite.options import (
    DEFAULT_DATASET,
    DEFAULT_MODEL,
    DEFAULT_VSI_DATASET,
    FIXTURES,
    ConfigError,
    config_values,
    parse_corruptions,
    parse_degrade,
    parse_severities,
)
from benchc.suite.options import default_of as _d

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_MODEL",
    "DEFAULT_VSI_DATASET",
    "FIXTURES",
    "ConfigError",
    "SuiteConfig",
    "parse_corruptions",
    "parse_degrade",
    "parse_severities",
]


@dataclass(frozen=True)
class SuiteConfig:
    """What to run: model, dataset, conditions, and where results and thresholds live."""

    model: str = _d("model")
    revision: str | None = _d("revision")
    trust_remote_code: bool = _d("trust_remote_code")
    dataset: str = _d("dataset")
    corruptions: tuple[str, ...] = _d("corruptions")
    severities: tuple[int, ...] = _d("severities")
    image_size: int | None = _d("image_size")  # None: native for the embedded testbed, else 448
    batch_size: int | None = _d("batch_size")
    device: str = _d("device")
    dtype: str | None = _d("dtype")
    progress: str = _d("progress")  # benchc.suite.progress
    seed: int = _d("seed")
    results_dir: Path = _d("results_dir")  # noqa: RUF009 (a Path is immutable)
    cache_dir: Path | None = _d("cache_dir")  # noqa: RUF009 (a Path is immutable)
    thresholds_dir: Path = _d("thresholds_dir")  # noqa: RUF009 (a Path is immutable)
    #: The baseline gated against: a name inside ``thresholds_dir`` or an absolute folder
    #: (None: the model's own name, :mod:`benchc.gates.baselines`).
    baseline: str | None = _d("baseline")
    #: Smoke run: the dataset's first N samples only (None: all).
    limit: int | None = _d("limit")
    #: A sequential gate (docs/spec.md §6): at most ``looks`` looks, this run being ``look``.
    looks: int = _d("looks")
    look: int = _d("look")
    report: Path | None = _d("report")  # noqa: RUF009 (a Path is immutable)
    per_sample: bool = _d("per_sample")
    #: VSI region for samples without an annotation (docs/spec.md §5): a locator name or
    #: "module:attr".
    region_locator: str = _d("region_locator")
    #: Which VSI the VSI gates read (docs/spec.md §5): ``top50`` or ``full``.
    vsi_support: str = _d("vsi_support")
    degrade: dict[str, float] = field(default_factory=dict)
    #: Typed ``--model-args`` (``benchc.models.registry.parse_model_args``), passed to the backend.
    model_args: dict[str, Any] = field(default_factory=dict)
    vsi_dataset: str | None = _d("vsi_dataset")  # None: the embedded set with the testbed
    false_alarm_budget: float = _d("false_alarm_budget")
    strict_gates: bool = _d("strict_gates")
    #: What an unresolved or inconclusive verdict does to the exit code
    #: (:mod:`benchc.gates.states`; None: :attr:`inconclusive_mode` decides).
    inconclusive: str | None = _d("inconclusive")
    worker_id: str | None = None

    @property
    def policy(self) -> Policy:
        """How this run gates and exits (:class:`benchc.gates.states.Policy`)."""
        return Policy(self.strict_gates, self.inconclusive)  # type: ignore[arg-type]

    @property
    def inconclusive_mode(self) -> str:
        """``--inconclusive`` as given, else ``fail`` under ``--strict-gates`` (a release
        gate passes on PASS only) and ``warn`` otherwise."""
        return self.policy.mode

    #: The command line this session was started with (provenance; None: this process's).
    command_line: str | None = None
    #: Skip (and count) bad samples instead of failing on the first one.
    lenient: bool = _d("lenient")
    #: Let dataset image/mask paths leave the dataset's folder (shared image folders).
    allow_outside_root: bool = _d("allow_outside_root")
    #: Seconds to wait for a results lock held by another host (None: BENCHC_LOCK_TIMEOUT/600).
    lock_timeout: float | None = _d("lock_timeout")
    #: ``--dataset-args``: dataset field -> column of a Hugging Face / Hub dataset.
    dataset_args: dict[str, str] = field(default_factory=dict)
    #: After the run (docs/guides/exporters.md): the per-sample log and the exporters' targets.
    log_samples: bool = _d("log_samples")
    wandb: str | None = _d("wandb")
    mlflow: str | None = _d("mlflow")
    push_to_hub: str | None = _d("push_to_hub")
    #: ``--export``: (exporter name, target) pairs, any exporter of ``benchc.exporters``.
    export: tuple[tuple[str, str], ...] = ()
    #: Beyond one process (docs/guides/cluster.md): ``local`` or ``ray``, the Ray cluster, its
    #: replicas and GPUs per replica (None: from the cluster); a finished store to gate on.
    executor: str = _d("executor")
    ray_address: str | None = _d("ray_address")
    ray_actors: int | None = _d("ray_actors")
    ray_gpus: int | None = _d("ray_gpus")
    from_store: str | None = _d("from_store")

    @property
    def conditions(self) -> list[str]:
        """The selected cells in (corruption, severity) order."""
        return [spec.condition_key(c, s) for c in self.corruptions for s in self.severities]

    @property
    def embedded_dataset(self) -> bool:
        embedded = (Path(DEFAULT_DATASET).resolve(), Path(DEFAULT_VSI_DATASET).resolve())
        return Path(self.dataset).resolve() in embedded

    def resolved_vsi_dataset(self) -> str:
        """The VSI gates' dataset: ``--vsi-dataset``; else the embedded VSI set when the
        embedded testbed runs, else ``--dataset`` itself."""
        if self.vsi_dataset is not None:
            return self.vsi_dataset
        if Path(self.dataset).resolve() == Path(DEFAULT_DATASET).resolve():
            return DEFAULT_VSI_DATASET
        return self.dataset

    def resolved_image_size(self) -> int | None:
        """docs/spec.md §1: 448 by default; the embedded testbed keeps its native size (None)."""
        if self.image_size is not None:
            return self.image_size
        return None if self.embedded_dataset else spec.DEFAULT_IMAGE_SIZE

    def resolved_device(self) -> str:
        """``auto``: CUDA when present (under xdist: GPU = worker number mod count), else CPU."""
        if self.device != "auto":
            return self.device
        import torch

        if not torch.cuda.is_available():
            return "cpu"
        n = torch.cuda.device_count()
        index = (
            int(self.worker_id[2:]) % n if self.worker_id and self.worker_id[2:].isdigit() else 0
        )
        return f"cuda:{index}"

    @classmethod
    def from_options(cls, get: Any, *, rootdir: Path, worker_id: str | None = None) -> SuiteConfig:
        """Build from ``config.getoption``-style ``get(dest)`` (None: not given), each field as
        :data:`benchc.suite.options.OPTIONS` declares it; relative paths are resolved against
        ``rootdir`` so every xdist worker agrees."""
        return cls(**config_values(get, rootdir), worker_id=worker_id)
