"""The per-pytest-session state: configuration, then (lazily) dataset, backend and run.

Loading is lazy so that ``pytest benchc_tests/unit`` never pays for a model, and memoised so
that a model which cannot load is reported once (as a usage error) instead of once per cell.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from benchc.suite.config import SuiteConfig

if TYPE_CHECKING:  # the heavy stack is imported on first use, not when pytest loads the plugin
    from benchc.data.sample import Dataset
    from benchc.gates.baselines import BaselineRef
    from benchc.models.base import Backend
    from benchc.results import RunKey
    from benchc.suite.run import SuiteRun


def quiet_progress_bars() -> None:
    """``pytest -q``: no weight-loading bars from transformers or the hub."""
    if "transformers" in sys.modules:  # already imported: it read the environment then
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    else:
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


class LoadError(RuntimeError):
    """The dataset or the model named on the command line cannot be used."""


def open_dataset(cfg: SuiteConfig) -> Dataset:
    from benchc.data import load_dataset
    from benchc.suite.inputs import check_for_run

    try:
        dataset = load_dataset(
            cfg.dataset,
            lenient=cfg.lenient,
            allow_outside_root=cfg.allow_outside_root,
            columns=cfg.dataset_args or None,
        )
        dataset = check_for_run(dataset, cfg.resolved_image_size(), lenient=cfg.lenient)
    except Exception as exc:
        raise LoadError(f"--dataset {cfg.dataset!r} cannot be loaded: {exc}") from exc
    if len(dataset) == 0:
        raise LoadError(f"--dataset {cfg.dataset!r} holds no samples")
    if cfg.limit is not None and cfg.limit < len(dataset):
        dataset = limited(dataset, cfg.limit)
    return dataset


#: Marks a ``--limit`` dataset's fingerprint: ``<whole dataset's>+first<N>``.
LIMIT_MARK = "+first"


def limited(dataset: Dataset, n: int) -> Dataset:
    """The first ``n`` samples (``--limit``): stored under a fingerprint of their own, gated
    against the whole dataset's baseline on the samples both hold."""
    from dataclasses import replace

    return replace(
        dataset,
        samples=list(dataset.samples)[:n],
        fingerprint=f"{dataset.fingerprint}{LIMIT_MARK}{n}",
    )


def source_fingerprint(fingerprint: str) -> str:
    """The whole dataset's fingerprint behind a ``--limit`` one (any other: itself)."""
    return fingerprint.partition(LIMIT_MARK)[0]


def open_backend(cfg: SuiteConfig) -> Backend:
    """The model of ``--model``, wrapped by ``--benchc-degrade`` when given."""
    from benchc.models import load_backend
    from benchc.models.registry import resolve

    try:
        local = resolve(cfg.model)[0].computes_locally
    except ValueError as exc:
        raise LoadError(f"--model {cfg.model!r} cannot be loaded: {exc}") from exc
    # Only what the user set (or the GPU an xdist worker owns): black-box backends take no
    # device or dtype (and need no torch: 1.6 s of a served run's start), and each backend
    # keeps its own defaults.
    kwargs: dict[str, object] = {}
    if cfg.revision is not None:
        kwargs["revision"] = cfg.revision
    if cfg.trust_remote_code:
        kwargs["trust_remote_code"] = True
    if cfg.device != "auto" or (local and cfg.resolved_device() != "cpu"):
        kwargs["device"] = cfg.resolved_device()
    if cfg.dtype is not None:
        kwargs["dtype"] = cfg.dtype
    if cfg.batch_size is not None:
        kwargs["batch_size"] = cfg.batch_size
    if cfg.model_args:
        kwargs["model_args"] = dict(cfg.model_args)
    try:
        backend = load_backend(cfg.model, **kwargs)
    except Exception as exc:
        raise LoadError(
            f"--model {cfg.model!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc
    if local and kwargs.get("device", "cpu") == "cpu":
        _limit_cpu_threads(cfg.worker_id)
    if cfg.degrade:  # the test-only wrapper benchc.testing registers (benchc.wrappers)
        from benchc.registry import WRAPPERS

        backend = WRAPPERS.load("degrade")(backend, **cfg.degrade)
    return backend


def _limit_cpu_threads(worker_id: str | None) -> None:
    """Give torch half the cores (one per xdist worker) unless ``OMP_NUM_THREADS`` says
    otherwise: the other half feeds the corruption pool, and oversubscribed OpenMP threads
    spin-wait, which made the tiny model ~2.5x slower on a busy 2-core machine."""
    if os.environ.get("OMP_NUM_THREADS"):
        return
    import torch

    if worker_id and worker_id != "master":
        torch.set_num_threads(1)
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


def check_model_source(cfg: SuiteConfig) -> None:
    """A cheap check that ``--model`` names something loadable (no weights are read).

    Used by the xdist controller, which never loads the model itself: a typo must be one usage
    error there, not a crash in every worker. Non-HF schemes (``openai:...``) are not checked.
    """
    if cfg.from_store is not None or (":" in cfg.model and not Path(cfg.model).exists()):
        return  # --from-store loads no model: the CI job gating on it may not have one
    from benchc.models.source import resolve_source

    try:
        resolve_source(cfg.model, cfg.revision)
    except Exception as exc:
        raise LoadError(
            f"--model {cfg.model!r} cannot be loaded: {type(exc).__name__}: {exc}"
        ) from exc


@dataclass
class SuiteSession:
    """Everything the fixtures share within one pytest process."""

    cfg: SuiteConfig
    _dataset: Dataset | None = None
    _backend: Backend | None = None
    _run: SuiteRun | None = None
    _vsi_run: SuiteRun | None = None
    _baseline: BaselineRef | None = None
    #: Conditions the selected cases need, in run order (set after collection).
    planned_conditions: list[str] = field(default_factory=list)
    #: Conditions whose option rotations the selected cases read (docs/spec.md §1).
    planned_rotations: list[str] = field(default_factory=list)
    #: Run keys computed elsewhere, by dataset fingerprint (a Ray driver's actors', or
    #: ``--from-store``'s manifests): the runs read and write under them.
    run_keys: dict[str, RunKey] = field(default_factory=dict)
    #: Enters the run key of a distributed run (:mod:`benchc.engine.devices`).
    device_class: str | None = None
    #: Whether the runs write their sample table and manifest (an actor, --from-store: no).
    record: bool = True
    #: The route the baseline recorded (``option_access``), checked before the first query;
    #: None when recording, or when the baseline recorded none.
    expected_route: str | None = None

    def _run_of(self, cfg: SuiteConfig, dataset: Dataset) -> SuiteRun:
        from benchc.suite.run import SuiteRun, default_corruption_workers

        run = SuiteRun(
            cfg,
            dataset,
            self.backend,
            corruption_workers=default_corruption_workers(self.cfg.worker_id),
            key=self.run_keys.get(dataset.fingerprint),
            device_class=self.device_class,
            record=self.record,
        )
        run.baseline_route = lambda: self.expected_route
        return run

    @property
    def dataset(self) -> Dataset:
        if self._dataset is None:
            self._dataset = open_dataset(self.cfg)
        return self._dataset

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = open_backend(self.cfg)
        return self._backend

    def check_model_inputs(self) -> None:
        """Prompt length against the model's context and its special tokens in the text: once
        the model is loaded, before any case (``--lenient`` drops the samples instead)."""
        from benchc.suite.inputs import check_for_model

        try:
            self._dataset = check_for_model(self.dataset, self.backend, lenient=self.cfg.lenient)
        except ValueError as exc:
            msg = f"--dataset {self.cfg.dataset!r} cannot be used with this model: {exc}"
            raise LoadError(msg) from None

    @property
    def run(self) -> SuiteRun:
        if self._run is None:
            self._run = self._run_of(self.cfg, self.dataset)
        return self._run

    @property
    def vsi_run(self) -> SuiteRun:
        """The model on the VSI gates' dataset (:meth:`SuiteConfig.resolved_vsi_dataset`)."""
        if self._vsi_run is None:
            from dataclasses import replace

            vsi_cfg = replace(self.cfg, dataset=self.cfg.resolved_vsi_dataset())
            if vsi_cfg.dataset == self.cfg.dataset:
                self._vsi_run = self.run
            else:
                from benchc.suite.inputs import check_for_model

                try:
                    dataset = check_for_model(
                        open_dataset(vsi_cfg), self.backend, lenient=self.cfg.lenient
                    )
                except ValueError as exc:
                    raise LoadError(
                        f"VSI dataset {vsi_cfg.dataset!r} cannot be used with this model: {exc}"
                    ) from None
                self._vsi_run = self._run_of(vsi_cfg, dataset)
        return self._vsi_run

    @property
    def baseline(self) -> BaselineRef:
        """The baseline this run is gated against (``--baseline``, else the model's own name:
        only then is the model loaded to learn it)."""
        from benchc.gates.baselines import resolve

        if self._baseline is None:
            name = None if self.cfg.baseline is not None else self.backend.name
            self._baseline = resolve(self.cfg.thresholds_dir, self.cfg.baseline, name)
        return self._baseline

    def sides(self) -> dict[str, str]:
        """The candidate and the baseline, each with its name and source (summary, JUnit,
        report)."""
        ref = self.baseline
        return {
            "candidate": self.backend.name,
            "candidate_source": self.cfg.model,
            "baseline": ref.name,
            "baseline_source": ref.source,
        }

    @property
    def started(self) -> bool:
        return self._run is not None
