"""Facts about a run that are not failures but must not pass silently (the terminal summary).

Why: a dataset on which the model is below chance, or samples where the model does not answer
with a letter (option mass < 0.5, docs/spec.md §2), make every robustness figure of that run
doubtful; recording such a run as a baseline deserves a warning. Skipped samples
(``--lenient``) and VSI regions found by the locator or replaced by the whole image
(docs/spec.md §5) are counted too.
"""

from __future__ import annotations

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
    logits = clean["option_logits"].astype(np.float64)
    k = dataset.n_options
    filled = np.where(np.isnan(logits), -np.inf, logits)
    accuracy = float((filled.argmax(axis=1) == dataset.answers).mean())
    chance = float((1.0 / k).mean())
    out = []
    if accuracy < chance:
        out.append(
            f"clean accuracy {accuracy:.3f} is below chance ({chance:.3f} for this dataset's "
            f"option counts): the model is not solving this dataset"
        )
    low = np.nonzero(clean["option_mass"] < spec.OPTION_MASS_FLAG)[0]
    if low.size:
        ids = [dataset.ids[i] for i in low]
        out.append(
            f"{low.size} of {len(k)} samples have clean option mass < {spec.OPTION_MASS_FLAG} "
            f"(the model is not answering with a letter): {_ids(ids)}"
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
        n = len(run.dataset)
        if "located" in vsi and vsi["located"].any():
            out.append(f"VSI: {int(vsi['located'].sum())} of {n} regions found by the locator")
        if "fallback" in vsi and vsi["fallback"].any():
            ids = [run.dataset.ids[i] for i in np.nonzero(vsi["fallback"])[0]]
            out.append(
                f"VSI: {len(ids)} of {n} samples have no region and blur the whole image: "
                f"{_ids(ids)}"
            )
    return out


def session_notes(state: Any, inherited: list[str]) -> list[str]:
    """This process's run notes (:func:`run_notes`, the backend's) after ``inherited`` (its
    xdist workers'), each once."""
    notes = list(inherited)
    if state.started:
        from benchc.suite.preflight import environment_note

        env = environment_note(state)
        own = run_notes(state.run) + state.run.notes() + state.backend.notes()
        own += [env] if env else []
        notes += [n for n in own if n not in notes]
    return notes
