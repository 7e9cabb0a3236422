"""The payload of each kind of case, computed from a :class:`SuiteRun`.

Test functions in ``benchc_tests/suite`` stay one line long; everything they compute is here
and unit-testable without pytest. Cases: ``test_cell[<corruption>-<severity>]``,
``test_family[<family>]``, ``test_model[<figure>]`` and ``test_vsi[<figure>]``; which figures
each level has comes from :data:`benchc.gates.figures.FIGURES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from benchc import spec
from benchc.gates import GridEvidence, Payload
from benchc.gates.check import ZFor
from benchc.gates.evidence import order_logits
from benchc.gates.figures import reads_rotations
from benchc.suite.payloads import build_payload, family_cells
from benchc.suite.run import SuiteRun


def run_info(run: SuiteRun) -> dict[str, Any]:
    """Settings that make two payloads comparable (see ``benchc.gates.pipeline.SETTINGS_KEYS``);
    a ``--limit`` run names the whole dataset (its gates compare the samples both sides hold)."""
    from benchc.suite.session import source_fingerprint

    return {
        "dataset_fingerprint": source_fingerprint(run.dataset.fingerprint),
        "image_size": run.image_size,
        "seed": run.cfg.seed,
    }


def grid_evidence(run: SuiteRun, keys: Sequence[str], *, order: bool = False) -> GridEvidence:
    """Option logits of the clean condition and ``keys`` for every sample of the run;
    ``order``: with the rotations of the rotated conditions among them (the run's selection
    fixes which: :func:`benchc.spec.order_conditions`)."""
    rotated = None
    if order:
        wanted = [c for c in spec.order_conditions(run.cfg.conditions) if c in (spec.CLEAN, *keys)]
        rotated = order_logits({c: run.rotated(c) for c in wanted})
    return GridEvidence.from_conditions(
        run.ids,
        run.dataset.answers,
        run.dataset.n_options,
        run.condition(spec.CLEAN)["option_logits"],
        {k: run.condition(k)["option_logits"] for k in keys},
        rotated,
    )


def _payload(run: SuiteRun, evidence, *, z_for: ZFor, **kw: Any) -> Payload:
    return build_payload(
        evidence,
        model=run.backend.name,
        dataset=run.dataset.name,
        seed=run.cfg.seed,
        z_for=z_for,
        **kw,
    )


def cell_case(run: SuiteRun, key: str, *, z_for: ZFor) -> Payload:
    """Figures of one (corruption, severity) cell over all samples."""
    return _payload(
        run, grid_evidence(run, [key]), level="cell", scope=key, info=run_info(run), z_for=z_for
    )


def family_case(run: SuiteRun, family: str, *, z_for: ZFor) -> Payload:
    """Figures of one corruption family over its selected cells."""
    cells = family_cells(run.cfg.conditions).get(family)
    if not cells:
        raise ValueError(f"family {family!r} has no selected cell")
    info = {**run_info(run), "conditions": cells}
    evidence = grid_evidence(run, cells, order=reads_rotations("family"))
    return _payload(run, evidence, level="family", scope=family, info=info, z_for=z_for)


def model_case(run: SuiteRun, figure: str, *, z_for: ZFor) -> Payload:
    """One model-level figure over the selected grid."""
    keys = run.cfg.conditions
    info = {**run_info(run), "conditions": list(keys)}
    return _payload(
        run,
        grid_evidence(run, keys, order=reads_rotations("model", [figure])),
        level="model",
        scope="model",
        names=[figure],
        info=info,
        z_for=z_for,
    )


def vsi_case(run: SuiteRun, figure: str, *, z_for: ZFor) -> Payload:
    """One VSI figure on ``run``'s dataset (the embedded VSI set by default); raises
    :class:`benchc.suite.vsi.VSIUnavailable` for a backend without distributions or tower."""
    from benchc.suite.vsi import vsi_arrays, vsi_evidence, vsi_info

    arrays = vsi_arrays(run)
    support = run.cfg.vsi_support
    evidence = vsi_evidence(arrays, run.ids, support)
    info = {**run_info(run), **vsi_info(arrays, run.cfg.region_locator, support)}
    for key, probe in zip(("probe_fold_std", "probe_high_fold_std"), evidence.probes, strict=True):
        if probe is not None:  # the fold std the report shows for a baseline from snapshots
            info[key] = round(probe.fold_std, 6)
    return _payload(
        run,
        evidence,
        level="vsi",
        scope="vsi",
        names=[figure],
        info=info,
        z_for=z_for,
    )
