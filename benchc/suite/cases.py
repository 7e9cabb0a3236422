"""The payload of each kind of case, computed from a :class:`SuiteRun`.

Test functions in ``benchc_tests/suite`` stay one line long; everything they compute is here
and unit-testable without pytest.
"""

from __future__ import annotations

from typing import Any

from benchc.gates import Figure, Payload, parse_rules
from benchc.suite.figures import cell_payload, model_payload
from benchc.suite.run import SuiteRun


def run_info(run: SuiteRun, *, grid: bool = False) -> dict[str, Any]:
    """Settings that make two payloads comparable (see ``benchc.suite.gate.SETTINGS_KEYS``)."""
    info: dict[str, Any] = {
        "dataset_fingerprint": run.dataset.fingerprint,
        "image_size": run.image_size,
        "seed": run.cfg.seed,
    }
    if grid:
        info["conditions"] = list(run.cfg.conditions)
    return info


def cell_case(run: SuiteRun, key: str) -> Payload:
    """Figures of one (corruption, severity) cell over all samples."""
    return cell_payload(
        run.cell(key),
        scope=key,
        model=run.backend.name,
        dataset=run.dataset.name,
        ids=run.ids,
        info=run_info(run),
        seed=run.cfg.seed,
    )


def model_case(run: SuiteRun, figure: str) -> Payload:
    """One model-level figure over the selected grid."""
    return model_payload(
        run.grid(),
        figure,
        model=run.backend.name,
        dataset=run.dataset.name,
        ids=run.ids,
        info=run_info(run, grid=True),
        seed=run.cfg.seed,
    )


def vsi_case(run: SuiteRun, figure: str) -> Payload:
    """One VSI figure (insensitive fraction or encoder-LLM gap); raises
    :class:`benchc.suite.vsi.VSIUnavailable` for a backend without distributions or tower."""
    from benchc.suite.vsi import vsi_payload

    return vsi_payload(run.vsi(), figure, run=run)


#: Per-sample drill-down rules: a sample fails when its RAS drops by more than 0.1 or it turns
#: from correct to wrong against the cell snapshot's per-sample values.
SAMPLE_RULES: tuple[str, ...] = ("ras:higher:floor=0.1:z=0", "correct:higher:floor=0.5:z=0")


def sample_case(run: SuiteRun, key: str, sample_id: str) -> Payload:
    """One sample under one cell: its RAS, correctness and consistency."""
    grid = run.cell(key)
    try:
        i = run.ids.index(sample_id)
    except ValueError:
        raise ValueError(f"sample {sample_id!r} is not in dataset {run.dataset.name!r}") from None
    nan = float("nan")
    return Payload(
        scope=f"{key}/{sample_id}",
        model=run.backend.name,
        dataset=run.dataset.name,
        n=1,
        figures={
            "ras": Figure(float(grid.ras[i, 0, 0]), nan, "ras"),
            "correct": Figure(float(grid.correct[i, 0, 0]), nan, "correct"),
            "consistent": Figure(float(grid.consistent[i, 0, 0]), nan, "consistent"),
        },
        rules=list(parse_rules(list(SAMPLE_RULES)).values()),
        ids=(sample_id,),
        per_sample={
            "ras": [float(grid.ras[i, 0, 0])],
            "correct": [float(grid.correct[i, 0, 0])],
            "consistent": [float(grid.consistent[i, 0, 0])],
        },
        info=run_info(run),
    )


def sample_baseline(cell: Payload, current: Payload) -> Payload | None:
    """The same sample's values in a recorded cell snapshot (None if it was not there)."""
    (sample_id,) = current.ids
    if sample_id not in cell.ids:
        return None
    i = list(cell.ids).index(sample_id)
    nan = float("nan")
    values = {k: float(cell.per_sample[k][i]) for k in ("ras", "correct", "consistent")}
    return Payload(
        scope=current.scope,
        model=cell.model,
        dataset=cell.dataset,
        n=1,
        figures={k: Figure(v, nan, k) for k, v in values.items()},
        rules=current.rules,
        ids=(sample_id,),
        per_sample={k: [v] for k, v in values.items()},
        info=cell.info,
    )
