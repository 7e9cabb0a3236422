"""The suite's settings, parsed once from the pytest command line and validated up front.

Every option, its default and its check are declared once, in :mod:`benchc.suite.options`; a bad
value (an unknown corruption, severity 7, a negative batch size) is one usage error naming the
option, before any model is loaded.
"""

from __future__ import annotations

from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any

from benchc import spec
from benchc.gates.states import Policy
from benchc.suite.options import (
    DEFAULT_DATASET,
    DEFAULT_MODEL,
    DEFAULT_VSI_DATASET,
    FIXTURES,
    OPTIONS,
    ConfigError,
    Option,
    config_values,
    parse_corruptions,
    parse_degrade,
    parse_severities,
)

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


class SuiteSettings:
    """What :class:`SuiteConfig` derives from its fields (the fields themselves come from the
    option table, :data:`benchc.suite.options.OPTIONS`)."""

    @property
    def policy(self) -> Policy:
        """How this run gates and exits (:class:`benchc.gates.states.Policy`)."""
        return Policy(self.strict_gates, self.inconclusive)  # type: ignore[arg-type]

    @property
    def inconclusive_mode(self) -> str:
        """``--inconclusive`` as given, else ``fail`` under ``--strict-gates`` (a release
        gate passes on PASS only) and ``warn`` otherwise."""
        return self.policy.mode

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
    def from_options(cls, get: Any, *, rootdir: Path, worker_id: str | None = None) -> Any:
        """Build from ``config.getoption``-style ``get(dest)`` (None: not given), each field as
        :data:`benchc.suite.options.OPTIONS` declares it; relative paths are resolved against
        ``rootdir`` so every xdist worker agrees."""
        return cls(**config_values(get, rootdir), worker_id=worker_id)


#: Fields of a run's configuration that no option sets.
EXTRA_FIELDS: tuple[tuple[str, Any, Any], ...] = (
    ("worker_id", "str | None", field(default=None)),
    #: The command line this session was started with (provenance; None: this process's).
    ("command_line", "str | None", field(default=None)),
)


def config_class(options: tuple[Option, ...] = OPTIONS) -> type:
    """A run's configuration type: one frozen field per option of ``options`` (its default the
    option's), then :data:`EXTRA_FIELDS`; the methods of :class:`SuiteSettings`. The one place
    a setting is declared is its :class:`~benchc.suite.options.Option`."""
    fields_ = []
    for opt in options:
        default = opt.given(lambda dest: None)
        if opt.empty is not None:
            spec_ = field(default_factory=opt.empty)
        elif isinstance(default, (dict, list, set)):
            spec_ = field(default_factory=lambda d=default: type(d)(d))
        else:
            spec_ = field(default=default)
        fields_.append((opt.field, Any, spec_))
    cls = make_dataclass("SuiteConfig", [*fields_, *EXTRA_FIELDS], bases=(SuiteSettings,),
                         frozen=True)  # fmt: skip
    cls.__module__ = __name__
    cls.__doc__ = "What to run: model, dataset, conditions, and where results and thresholds live."
    return cls


SuiteConfig = config_class()
