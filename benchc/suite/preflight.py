"""Before the first forward pass: is there a baseline, and can this run be compared with it?

Why here and not per case: a missing baseline or a setting that differs from it was found only
after the whole run was computed, once per case. Read from the snapshots' headers
(:func:`benchc.gates.baselines.recorded`) and the dataset fingerprints, it is one usage error
within seconds that names the option, both values and the likelier fix first
(:mod:`benchc.suite.messages`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from benchc import provenance
from benchc.data.fingerprint import LEGACY_VERSION
from benchc.gates.baselines import BaselineRef, Recorded, is_baseline_folder, recorded
from benchc.suite import messages
from benchc.suite.config import SuiteConfig
from benchc.suite.messages import UNKNOWN
from benchc.suite.session import LoadError, SuiteSession, open_dataset, source_fingerprint

Problem = tuple[str, str, dict[str, Any]]


def output_args(cfg: SuiteConfig) -> dict[str, Any]:
    """The ``--model-args`` (and ``--dtype``) that change outputs: they enter the model's
    fingerprint, so a baseline records them and a run must match them."""
    from benchc.models.registry import resolve

    out: dict[str, Any] = {}
    if cfg.model_args:
        try:
            schema = resolve(cfg.model)[0].args
        except ValueError:
            schema = {}
        out = {k: v for k, v in cfg.model_args.items() if k in schema and schema[k].changes_outputs}
    if cfg.dtype is not None:
        out["dtype"] = cfg.dtype
    return dict(sorted(out.items()))


def _size(x: Any) -> str:
    return "the dataset's native size" if x is None else f"{x} px"


def _source_problems(
    recorded: dict,
    fp: str,
    cfg: SuiteConfig,
    *,
    flag: str,
    key: str,
    spec: str | None,
    whose: str,
    ours: str,
    extra_fix: dict[str, Any] | None = None,
) -> list[Problem]:
    """The dataset (by fingerprint) and image size one side of the baseline was recorded on,
    against this run's (``cfg`` resolved for that side): the grid's or the VSI gates'.
    ``extra_fix``: settings that go with the recorded dataset (its ``--dataset-args``)."""
    out: list[Problem] = []
    extra_fix = extra_fix or {}
    was = recorded.get("dataset_fingerprint")
    if was not in (None, fp) and was == _legacy_fingerprint(cfg):
        out.append(
            (
                flag,
                f"{whose} was recorded on these same samples by an older benchc, whose dataset "
                f"fingerprint ({LEGACY_VERSION}: {str(was)[:12]}) also hashed the file name; "
                f"re-record it, or set dataset_fingerprint {was} to {fp} in its snapshots "
                "(docs/guides/datasets.md)",
                {key: UNKNOWN},
            )
        )
    elif was not in (None, fp):
        out.append(
            (
                flag,
                f"{whose} was recorded on '{recorded.get('dataset')}'"
                + (f" ({spec})" if spec else "")
                + f", fingerprint {str(was)[:12]}; this run's "
                f"{cfg.dataset} has {fp[:12]}",
                {key: spec or UNKNOWN, **extra_fix},
            )
        )
    if "image_size" in recorded and recorded["image_size"] != cfg.resolved_image_size():
        out.append(
            (
                "--image-size",
                f"{whose} was recorded at {_size(recorded['image_size'])}, {ours} uses "
                f"{_size(cfg.resolved_image_size())}",
                {"image_size": recorded["image_size"]},
            )
        )
    return out


def _legacy_fingerprint(cfg: SuiteConfig) -> str | None:
    """This side's whole dataset under :data:`LEGACY_VERSION` (asked only when the recorded
    fingerprint differs, to tell an older benchc's baseline from other samples)."""
    from benchc.data.fingerprint import fingerprint

    try:
        return fingerprint(open_dataset(replace(cfg, limit=None)).samples, legacy=True)
    except LoadError:
        return None


def _grid_problems(cfg: SuiteConfig, fp: str, rec: Recorded) -> list[Problem]:
    g = rec.grid
    # the recorded dataset's own column mapping (none recorded: the run's, as before)
    args = {"dataset_args": rec.manifest.get("dataset_args", cfg.dataset_args)}
    out = _source_problems(
        g, fp, cfg, flag="--dataset", key="dataset", spec=rec.manifest.get("dataset"),
        whose="the baseline", ours="this run", extra_fix=args,
    )  # fmt: skip
    if g.get("seed") is not None and g["seed"] != cfg.seed:
        out.append(
            (
                "--seed",
                f"the baseline was recorded with seed {g['seed']}, this run uses {cfg.seed}",
                {"seed": g["seed"]},
            )
        )
    extra = [c for c in cfg.conditions if c not in rec.conditions] if rec.conditions else []
    if extra:
        from benchc import spec as bspec

        parsed = [bspec.parse_condition(c) for c in rec.conditions]
        corr = tuple(dict.fromkeys(c for c, _ in parsed))
        sev = tuple(sorted({s for _, s in parsed}))
        out.append(
            (
                "--corruptions/--severities",
                f"{len(extra)} selected cell(s) have no baseline (first: {extra[0]}); the "
                f"baseline covers {len(rec.conditions)} cells",
                {"corruptions": corr, "severities": sev},
            )
        )
    return out


def _vsi_problems(cfg: SuiteConfig, vsi_fp: str, rec: Recorded) -> list[Problem]:
    vsi_cfg = replace(cfg, dataset=cfg.resolved_vsi_dataset())
    out = _source_problems(
        rec.vsi, vsi_fp, vsi_cfg, flag="--vsi-dataset", key="vsi_dataset",
        spec=rec.manifest.get("vsi_dataset"), whose="the VSI gates' baseline",
        ours="this run's VSI set",
    )  # fmt: skip
    if rec.vsi_support is not None and rec.vsi_support != cfg.vsi_support:
        out.append(
            (
                "--vsi-support",
                f"the VSI baseline gates {rec.vsi_support}, this run {cfg.vsi_support}",
                {"vsi_support": rec.vsi_support},
            )
        )
    return out


def _args_problems(cfg: SuiteConfig, rec: Recorded) -> list[Problem]:
    if "model_args" not in rec.manifest:
        return []
    was, now = rec.manifest.get("model_args") or {}, output_args(cfg)
    if was == now:
        return []
    fix: dict[str, Any] = {"model_args": {k: v for k, v in was.items() if k != "dtype"}}
    fix["dtype"] = was.get("dtype")
    return [
        (
            "--model-args/--dtype",
            f"the baseline was recorded with {was or 'none'}, this run has {now or 'none'} "
            "(arguments that change outputs)",
            fix,
        )
    ]


def check_baseline(
    state: SuiteSession, *, update: bool, grid: bool = True, vsi: bool = True
) -> None:
    """One :class:`LoadError` when the run cannot be gated against its baseline; nothing to
    check when recording (``update``), except that a smoke run records nothing."""
    cfg = state.cfg
    if update:
        if cfg.limit is not None:
            raise LoadError(
                "--limit with --snapshot-update: a baseline is recorded on the whole dataset; "
                f"drop --limit:\n    {messages.command(cfg, update=True)}"
            )
        return
    ref: BaselineRef = state.baseline
    if not is_baseline_folder(ref.folder):
        name = state.backend.name if cfg.baseline is None else _model_name(cfg)
        raise LoadError(messages.missing_baseline(cfg, ref, name))
    rec = recorded(ref.folder)
    problems: list[Problem] = []
    if rec.formats:
        name, fmt = next(iter(rec.formats.items()))
        problems.append(
            (
                "snapshot format",
                f"{len(rec.formats)} snapshot(s) of another format (first: {name}, format "
                f"{fmt}); this benchc reads format of its own",
                {"model": UNKNOWN},
            )
        )
    if grid and rec.grid:
        problems += _grid_problems(cfg, source_fingerprint(state.dataset.fingerprint), rec)
    if vsi and rec.vsi:
        problems += _vsi_problems(cfg, _vsi_fingerprint(state), rec)
    problems += _args_problems(cfg, rec)
    if problems:
        model = rec.manifest.get("model")
        raise LoadError(messages.not_comparable(cfg, ref, problems, model))


def _model_name(cfg: SuiteConfig) -> str:
    from pathlib import Path

    return Path(cfg.model).name if Path(cfg.model).exists() else cfg.model


def _vsi_fingerprint(state: SuiteSession) -> str:
    cfg = state.cfg
    vsi_cfg = replace(cfg, dataset=cfg.resolved_vsi_dataset())
    if vsi_cfg.dataset == cfg.dataset:
        return source_fingerprint(state.dataset.fingerprint)
    return source_fingerprint(open_dataset(vsi_cfg).fingerprint)


def environment_note(state: SuiteSession) -> str | None:
    """One line when the baseline was recorded in another environment (the gate still runs)."""
    from benchc.gates.baselines import read_manifest

    try:
        ref = state.baseline
    except Exception:
        return None
    was = read_manifest(ref.folder).get("environment")
    diff = provenance.differences(was, provenance.environment(state.backend))
    if not diff:
        return None
    return f"baseline '{ref.name}' was recorded in another environment: " + ", ".join(diff)


__all__ = ["check_baseline", "environment_note", "output_args"]
