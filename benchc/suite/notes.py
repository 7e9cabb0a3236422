"""Facts about a run that are not failures but must not pass silently (the terminal summary).

Why: a dataset on which the model is below chance, or samples where the model does not answer
with a letter (option mass < 0.5, docs/spec.md §2), make every robustness figure of that run
doubtful; recording such a run as a baseline deserves a warning. Skipped samples
(``--lenient``) and VSI regions found by the locator or replaced by the whole image
(docs/spec.md §5) are counted too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from benchc import spec
from benchc.data.validate import skip_summary
from benchc.results import StoreError

#: At most this many sample ids are listed per note.
MAX_IDS = 10


def _ids(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS])
    return shown + (f", ... (+{len(ids) - MAX_IDS})" if len(ids) > MAX_IDS else "")


def baseline_warnings(run: Any) -> list[str]:
    """Why the run's clean results are a doubtful baseline: below-chance clean accuracy and
    samples with low option mass. Reads the stored clean condition; ``[]`` when it is absent.

    The gates' ``--snapshot-update`` shows these when recording a baseline.
    """
    store, dataset = run.store, run.dataset
    if not store.has(spec.CLEAN):
        return []
    try:
        clean = store.load(spec.CLEAN)
    except StoreError:
        return []
    return clean_warnings(
        clean["option_logits"], clean["option_mass"], dataset.answers, dataset.n_options,
        list(dataset.ids),
    )  # fmt: skip


def clean_warnings(
    logits: np.ndarray,
    option_mass: np.ndarray,
    answers: np.ndarray,
    n_options: np.ndarray,
    ids: list[str],
) -> list[str]:
    """:func:`baseline_warnings` on the clean condition's arrays (a live run's or a stored
    one's): below-chance accuracy, samples with option mass < ``spec.OPTION_MASS_FLAG``."""
    filled = np.where(np.isnan(logits), -np.inf, logits.astype(np.float64))
    accuracy = float((filled.argmax(axis=1) == answers).mean())
    chance = float((1.0 / np.asarray(n_options)).mean())
    out = []
    if accuracy < chance:
        out.append(
            f"clean accuracy {accuracy:.3f} is below chance ({chance:.3f} for this dataset's "
            f"option counts): the model is not solving this dataset"
        )
    low = np.nonzero(option_mass < spec.OPTION_MASS_FLAG)[0]
    if low.size:
        out.append(
            f"{low.size} of {len(ids)} samples have clean option mass < {spec.OPTION_MASS_FLAG} "
            f"(the model is not answering with a letter): {_ids([ids[i] for i in low])}"
        )
    return out


def vsi_region_notes(vsi: Any, ids: list[str]) -> list[str]:
    """VSI regions found by the locator, and samples without one (whole image blurred), from
    the VSI arrays (``located`` / ``fallback`` flags, when stored)."""
    out = []
    n = len(ids)
    if "located" in vsi and vsi["located"].any():
        out.append(f"VSI: {int(vsi['located'].sum())} of {n} regions found by the locator")
    if "fallback" in vsi and vsi["fallback"].any():
        missing = [ids[i] for i in np.nonzero(vsi["fallback"])[0]]
        out.append(
            f"VSI: {len(missing)} of {n} samples have no region and blur the whole image: "
            f"{_ids(missing)}"
        )
    return out


def run_notes(run: Any) -> list[str]:
    """Everything the summary reports about a run: skipped samples, the baseline warnings, and
    VSI regions located or replaced by the whole-image fallback."""
    out = []
    skipped = getattr(run.dataset, "skipped", {})
    if skipped:
        out.append(f"{len(skipped)} bad sample(s) skipped (--lenient): {skip_summary(skipped)}")
    out.extend(baseline_warnings(run))
    vsi_name = getattr(run, "vsi_name", None)
    if vsi_name and run.store.has(vsi_name):
        try:
            vsi = run.store.load(vsi_name)
        except StoreError:
            vsi = {}
        out.extend(vsi_region_notes(vsi, list(run.dataset.ids)))
    return out


def stored_run_notes(run: Any) -> list[str]:
    """:func:`run_notes` of a stored run (a :class:`benchc.results.reader.StoredRun`, read by
    ``benchc report`` long after the session): what its folder still shows (the clean
    warnings, the VSI regions); skipped samples and the backend's notes lived only in the
    session, whose report passes them itself."""
    from benchc.results.store import load_npz

    out: list[str] = []
    path = Path(run.path) / f"{spec.CLEAN}.npz"
    if run.clean_logits is not None and path.is_file():
        try:
            mass = load_npz(path).get("option_mass")
        except StoreError:
            mass = None
        if mass is not None and len(mass) == len(run.ids):  # not a subset of the run's rows
            out += clean_warnings(run.clean_logits, mass, run.answers, run.n_options, list(run.ids))
    if run.vsi is not None:
        out += vsi_region_notes(run.vsi, list(run.vsi_ids or run.ids))
    return out


def session_notes(state: Any, inherited: list[str]) -> list[str]:
    """This process's run notes (:func:`run_notes`, the backend's) after ``inherited`` (its
    xdist workers'), each once."""
    notes = list(inherited)
    if state.started:
        from benchc.suite.preflight import environment_note

        env = environment_note(state)
        own = run_notes(state.run) + state.run.notes() + state.backend.notes()
        vsi_run = getattr(state, "_vsi_run", None)
        repaired = vsi_run.store.repair_note() if vsi_run not in (None, state.run) else None
        own += [repaired] if repaired else []
        own += [env] if env else []
        notes += [n for n in own if n not in notes]
    return notes
