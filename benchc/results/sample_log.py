"""The per-sample log: what the model answered for every sample under every stored condition.

Why: the report shows a few movers; a user asking "what did the model answer for sample X under
fog-3?" should not need code. The log is written from the results store alone (option logits
already on disk), so it costs no forward pass and never loads a model. One JSON object per
line, one line per sample of each run folder, in the run's sample order; the schema is
docs/guides/exporters.md's "Per-sample log" and carries :data:`SCHEMA` in every line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchc import spec
from benchc.fsutil import atomic_write
from benchc.metrics.options import option_probs, predictions
from benchc.results.reader import SAMPLES, StoredRun, read_run, vsi_files
from benchc.results.store import load_npz

#: The file name next to ``report.json``.
SAMPLE_LOG = "sample-log.jsonl"
#: Bumped whenever a field changes meaning or goes away (new fields keep the version).
SCHEMA = "benchc-samples/1"
#: Probabilities are rounded to this many decimals (float32 logits carry ~7 digits).
DECIMALS = 6
#: Per-sample VSI arrays copied into each line's ``vsi`` object when the run stored them.
VSI_FIELDS = ("vsi", "vsi_top50", "vsi_whole", "vsi_whole_top50")


def stored_conditions(run_dir: Path) -> list[str]:
    """Every condition with an array file in ``run_dir``: clean first, then the spec's
    corruption order and ascending severity (partial grids included)."""
    names = {p.stem for p in Path(run_dir).glob("*.npz")}
    order = [spec.CLEAN] + [
        spec.condition_key(c, s) for c in spec.CORRUPTIONS for s in sorted(spec.SEVERITIES)
    ]
    return [name for name in order if name in names]


def _condition(logits: np.ndarray, k: np.ndarray, answers: np.ndarray) -> Iterator[dict]:
    """``{"prediction", "correct", "probs"}`` per row of (N, K_max) option logits, through the
    metrics' own softmax and argmax (so ``correct`` agrees with the report's accuracy); a row
    the run skipped (all-NaN logits) gives nulls."""
    probs = option_probs(logits, k)
    pred = predictions(probs)
    for i in range(len(k)):
        row = probs[i, : k[i]]
        if np.isnan(row).any():
            yield {"prediction": None, "correct": None, "probs": None}
            continue
        yield {
            "prediction": spec.LETTERS[int(pred[i])],
            "correct": bool(pred[i] == answers[i]),
            "probs": [round(float(v), DECIMALS) for v in row],
        }


def _number(value: Any) -> float | None:
    v = float(value)
    return v if np.isfinite(v) else None


def records(run_dir: Path, *, role: str = "grid") -> Iterator[dict[str, Any]]:
    """The log's lines for one run folder (``role``: ``grid``, or ``vsi`` for a VSI-only run
    of its own dataset)."""
    run_dir = Path(run_dir)
    run: StoredRun = read_run(run_dir)
    k = np.asarray(run.n_options, dtype=np.int64)
    answers = np.asarray(run.answers, dtype=np.int64)
    per_condition = {
        name: list(_condition(load_npz(run_dir / f"{name}.npz")["option_logits"], k, answers))
        for name in stored_conditions(run_dir)
    }
    vsi_path = next(iter(vsi_files(run_dir)), None)
    vsi = load_npz(vsi_path) if vsi_path is not None else None
    if vsi is not None and spec.CLEAN not in per_condition and "option_logits" in vsi:
        # a VSI run of its own dataset: the VSI pass's clean answers are its only condition
        per_condition[spec.CLEAN] = list(_condition(vsi["option_logits"], k, answers))
    for i, sid in enumerate(run.ids):
        line: dict[str, Any] = {
            "schema": SCHEMA,
            "role": role,
            "model": run.model_name,
            "dataset": run.dataset_name,
            "dataset_fingerprint": run.manifest.get("dataset_fingerprint"),
            "id": sid,
            "answer": spec.LETTERS[int(answers[i])],
            "n_options": int(k[i]),
            "conditions": {name: rows[i] for name, rows in per_condition.items()},
            "vsi": None,
        }
        if vsi is not None:
            line["vsi"] = {f: _number(vsi[f][i]) for f in VSI_FIELDS if f in vsi}
            for flag in ("located", "fallback"):
                if flag in vsi:
                    line["vsi"][flag] = bool(vsi[flag][i])
        yield line


def write_sample_log(groups: Sequence[tuple[Path, Path | None]], out_dir: Path) -> Path:
    """Write ``out_dir/sample-log.jsonl`` atomically for ``groups``, each ``(grid run folder, VSI
    run folder or None)`` as :func:`benchc.results.reader.group_runs` pairs them: a VSI run of
    its own dataset adds its samples as ``role: "vsi"`` lines. Returns the file's path."""
    folders: list[tuple[Path, str]] = []
    for grid, vsi in groups:
        folders.append((Path(grid), "grid"))
        if vsi is not None and Path(vsi) != Path(grid):
            folders.append((Path(vsi), "vsi"))
    for d, _ in folders:
        if not (d / f"{SAMPLES}.npz").is_file():
            raise FileNotFoundError(f"{d} is not a benchc results folder (no {SAMPLES}.npz)")
    lines = [
        json.dumps(rec, sort_keys=True, ensure_ascii=False, allow_nan=False)
        for d, role in folders
        for rec in records(d, role=role)
    ]
    out = Path(out_dir) / SAMPLE_LOG
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(out, "\n".join(lines) + "\n")
    os.chmod(out, 0o644)  # an artifact others read
    return out


def read_sample_log(path: Path) -> list[dict[str, Any]]:
    """The lines of a log, refusing another schema (one error naming the file and line)."""
    out = []
    for no, text in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        rec = json.loads(text)
        if rec.get("schema") != SCHEMA:
            raise ValueError(f"{path}:{no}: schema {rec.get('schema')!r}, expected {SCHEMA!r}")
        out.append(rec)
    return out
