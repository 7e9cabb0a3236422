"""The suite's settings, parsed once from the pytest command line and validated up front.

Every bad value (an unknown corruption, severity 7, a negative batch size) becomes one
``pytest.UsageError`` naming the option, before any model is loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
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


@dataclass(frozen=True)
class SuiteConfig:
    """What to run: model, dataset, conditions, and where results and thresholds live."""

    model: str = DEFAULT_MODEL
    revision: str | None = None
    trust_remote_code: bool = False
    dataset: str = DEFAULT_DATASET
    corruptions: tuple[str, ...] = spec.CORRUPTIONS
    severities: tuple[int, ...] = spec.SEVERITIES
    image_size: int | None = None  # None: native size for the embedded testbed, else 448
    batch_size: int | None = None
    device: str = "auto"
    dtype: str | None = None
    seed: int = spec.DEFAULT_SEED
    results_dir: Path = Path(".benchc/results")
    cache_dir: Path | None = None
    thresholds_dir: Path = Path("thresholds")
    report: Path | None = None
    per_sample: bool = False
    #: VSI region for samples without an annotation (docs/spec.md §5): a locator name or
    #: "module:attr".
    region_locator: str = "none"
    degrade: dict[str, float] = field(default_factory=dict)
    #: Typed ``--model-args`` (``benchc.models.registry.parse_model_args``), passed to the backend.
    model_args: dict[str, Any] = field(default_factory=dict)
    vsi_dataset: str | None = None  # None: the embedded VSI set with the embedded testbed
    false_alarm_budget: float = 0.01
    strict_gates: bool = False
    worker_id: str | None = None
    #: Skip (and count) bad samples instead of failing on the first one.
    lenient: bool = False
    #: Let dataset image/mask paths leave the dataset's folder (shared image folders).
    allow_outside_root: bool = False
    #: Seconds to wait for a results lock held by another host (None: BENCHC_LOCK_TIMEOUT/600).
    lock_timeout: float | None = None

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
        """Build from ``config.getoption``-style ``get(name)``; relative paths are resolved
        against ``rootdir`` so every xdist worker agrees."""

        def path(name: str) -> Path | None:
            value = get(name)
            if value is None:
                return None
            p = Path(os.path.expanduser(str(value)))
            return p if p.is_absolute() else rootdir / p

        image_size = get("benchc_image_size")
        if image_size is not None and image_size < 32:
            raise ConfigError(f"--image-size must be >= 32 px, got {image_size}")
        batch_size = get("benchc_batch_size")
        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"--batch-size must be >= 1, got {batch_size}")
        seed = get("benchc_seed")
        if seed is None or not 0 <= int(seed) < 2**63:
            raise ConfigError(f"--seed must be an integer in 0..2**63-1, got {seed}")
        lock_timeout = get("benchc_lock_timeout")
        if lock_timeout is not None and lock_timeout < 0:
            raise ConfigError(f"--lock-timeout must be >= 0 seconds, got {lock_timeout}")
        region_locator = get("benchc_region_locator") or "none"
        from benchc.corruptions.locate import resolve_locator

        try:
            resolve_locator(region_locator)
        except ValueError as exc:
            raise ConfigError(f"--region-locator: {exc}") from None
        model = get("benchc_model") or DEFAULT_MODEL
        budget = get("benchc_false_alarm_budget")
        budget = 0.01 if budget is None else float(budget)
        if not 0.0 < budget < 1.0:
            raise ConfigError(f"--false-alarm-budget must be in (0, 1), got {budget}")
        vsi_dataset = get("benchc_vsi_dataset")
        dataset = get("benchc_dataset") or DEFAULT_DATASET
        return cls(
            model=_local_or_id(model, rootdir),
            revision=get("benchc_revision"),
            trust_remote_code=bool(get("benchc_trust_remote_code")),
            dataset=_local_or_id(dataset, rootdir),
            corruptions=parse_corruptions(get("benchc_corruptions")),
            severities=parse_severities(get("benchc_severities")),
            image_size=image_size,
            batch_size=batch_size,
            device=get("benchc_device") or "auto",
            dtype=get("benchc_dtype"),
            seed=int(seed),
            results_dir=path("benchc_results_dir") or rootdir / ".benchc/results",
            cache_dir=path("benchc_cache_dir"),
            thresholds_dir=path("benchc_thresholds_dir") or rootdir / "thresholds",
            report=path("benchc_report"),
            per_sample=bool(get("benchc_per_sample")),
            region_locator=region_locator,
            degrade=parse_degrade(get("benchc_degrade")),
            model_args=_model_args(get("benchc_model_args"), model),
            vsi_dataset=_local_or_id(vsi_dataset, rootdir) if vsi_dataset else None,
            false_alarm_budget=budget,
            strict_gates=bool(get("benchc_strict_gates")),
            worker_id=worker_id,
            lenient=bool(get("benchc_lenient")),
            allow_outside_root=bool(get("benchc_allow_outside_root")),
            lock_timeout=lock_timeout,
        )


def _model_args(text: str | None, model: str) -> dict[str, Any]:
    from benchc.models.registry import parse_model_args

    try:
        return parse_model_args(text, model)
    except ValueError as exc:
        raise ConfigError(f"--model-args: {exc}") from None


def _local_or_id(value: str, rootdir: Path) -> str:
    """A relative path that exists under ``rootdir`` becomes absolute; a hub id stays as is."""
    p = Path(os.path.expanduser(value))
    if p.is_absolute():
        return str(p)
    if (rootdir / p).exists():
        return str(rootdir / p)
    return value


def parse_degrade(text: str | None) -> dict[str, float]:
    """``"damp=0.3,sharpen=3"`` (a hidden option used by the suite's own tests)."""
    from benchc.testing.degrade import KNOBS

    if not text:
        return {}
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
