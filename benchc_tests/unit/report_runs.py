"""Small stored runs written without a model, for the report's tests (unit and browser).

A run folder is what :class:`benchc.suite.run.SuiteRun` leaves behind; here the option logits
and VSI arrays are drawn from a seeded generator over a real (synthetic) dataset, so the
report's numbers, thumbnails and drill-down all have something real to show, in milliseconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from benchc import spec
from benchc.results import ResultStore, RunKey
from benchc.results.reader import SAMPLES, VSI

CORRUPTIONS = ("fog", "gaussian_noise")
SEVERITIES = (1, 2)


def make_dataset(folder: Path, n: int = 24, seed: int = 3) -> Path:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    save_jsonl(generate(n, seed), folder)
    return folder


def make_run(
    root: Path,
    dataset_dir: Path,
    *,
    model: str = "toy-vlm",
    seed: int = 0,
    damp: float = 0.0,
    corruptions: tuple[str, ...] = CORRUPTIONS,
    severities: tuple[int, ...] = SEVERITIES,
    vsi: bool = True,
    fingerprint: str | None = None,
    vsi_scale: np.ndarray | float = 1.0,
) -> Path:
    """A stored run of a random 'model' on ``dataset_dir``; ``damp`` > 0 makes corruptions
    hurt more (a worse checkpoint); ``fingerprint`` replaces the made-up model fingerprint
    (e.g. an ``hf:`` one, for a white-box run). Returns the run folder."""
    from benchc.data import load_dataset

    ds = load_dataset(dataset_dir)
    n, k_max = len(ds), int(ds.n_options.max())
    rng = np.random.default_rng(seed)
    key = RunKey(
        model_fingerprint=fingerprint or f"{model}-{seed}-{damp}",
        dataset_fingerprint=ds.fingerprint,
        settings={"image_size": None, "seed": 0},
        model_name=model,
        dataset_name=ds.name,
    )
    store = ResultStore(root, key)
    store.save(SAMPLES, {"ids": np.array(ds.ids), "answers": ds.answers, "n_options": ds.n_options})
    store.write_manifest({"dataset_spec": str(dataset_dir), "model_spec": model})
    onehot = np.eye(k_max, dtype=np.float32)[ds.answers]
    clean = rng.normal(0, 1, (n, k_max)).astype(np.float32) + 1.5 * onehot
    store.save(spec.CLEAN, {"option_logits": clean, "option_mass": np.ones(n, np.float32)})
    for c in corruptions:
        for s in severities:
            noise = rng.normal(0, 0.4 * s * (1 + damp), (n, k_max)).astype(np.float32)
            logits = clean * (1 - 0.15 * s * (1 + damp)) + noise
            store.save(
                spec.condition_key(c, s),
                {"option_logits": logits.astype(np.float32), "option_mass": np.ones(n, np.float32)},
            )
    if vsi:
        values = np.exp(rng.normal(-1.5, 2.0, n)) * vsi_scale  # vsi_scale < 1: less sensitive
        fc = rng.normal(0, 1, (n, 8)).astype(np.float32)
        fb = fc + rng.normal(0.6, 0.5, (n, 8)).astype(np.float32)
        top1 = rng.integers(0, 50, n)
        whole = values * np.exp(rng.normal(1.0, 1.0, n))
        store.save(
            VSI,
            {
                "vsi": values,
                "vsi_top50": values,
                "vsi_whole": whole,
                "vsi_whole_top50": whole,
                "top1_whole": np.where(rng.random(n) < 0.6, top1 + 1, top1),
                "option_logits": clean,
                "top1_clean": top1,
                "top1_blur": np.where(rng.random(n) < 0.3, top1 + 1, top1),
                "located": np.zeros(n, bool),
                "fallback": np.zeros(n, bool),
                "features_clean": fc,
                "features_blur": fb,
            },
        )
    return store.run_dir


def verdict(scope: str, figure: str, status: str, **kw) -> dict:
    """A gate verdict dict as the gates produce it."""
    level = kw.pop("level", "cell" if "-" in scope else "model")
    out = {
        "case": f"test_cell[{scope}]" if level == "cell" else f"test_model[{figure}]",
        "scope": scope,
        "level": level,
        "figure": figure,
        "label": figure.upper(),
        "direction": "higher",
        "baseline": -0.1,
        "current": -0.3 if status == "fail" else -0.1,
        "change": -0.2 if status == "fail" else 0.0,
        "tolerance": 0.05,
        "mdr": 0.04,
        "se_diff": 0.015,
        "floor": 0.02,
        "z": 3.2,
        "status": status,
        "reason": None,
        "movers": [],
    }
    out.update(kw)
    return out


def make_sampling_run(
    root: Path,
    white_box_run: Path,
    *,
    n_samples: int = 20,
    seed: int = 1,
    rows: np.ndarray | None = None,
    model: str | None = None,
) -> Path:
    """The sampling proxy (docs/spec.md §3) of a stored white-box run's model: per sample and
    condition, ``n_samples`` replies drawn from the run's option distribution, Jeffreys-smoothed
    counts as log p, stored under an ``openai:`` fingerprint without log-probs. ``rows``: the
    white-box run's samples it holds, in this order (default all); ``model``: another served
    model name (default the white-box run's)."""
    from benchc.results.reader import read_run
    from benchc.results.store import load_npz

    white = read_run(white_box_run)
    rng = np.random.default_rng(seed)
    rows = np.arange(len(white.ids)) if rows is None else np.asarray(rows)
    model = model or white.model_name
    key = RunKey(
        model_fingerprint=(
            f"openai:{model}@http://127.0.0.1:8000/v1:n{n_samples}:t1.0:"
            f"{spec.PROMPT_VERSION}:chat-1:letter-parser-2:seed0"
        ),
        dataset_fingerprint=f"{white.manifest['dataset_fingerprint']}-{len(rows)}",
        settings={"image_size": None, "seed": 0},
        model_name=model,
        dataset_name=white.dataset_name,
    )
    store = ResultStore(root, key)
    table = load_npz(white.path / f"{SAMPLES}.npz")
    store.save(SAMPLES, {name: np.asarray(a)[rows] for name, a in table.items()})
    store.write_manifest({"model_spec": f"openai:{model}@http://127.0.0.1:8000/v1"})
    k = white.n_options[rows]
    for name in [spec.CLEAN, *white.cells]:
        logits = load_npz(white.path / f"{name}.npz")["option_logits"].astype(np.float64)[rows]
        out = np.full_like(logits, np.nan)
        for i, row in enumerate(logits):
            p = np.exp(row[: k[i]] - row[: k[i]].max())
            counts = rng.multinomial(n_samples, p / p.sum())
            alpha = spec.JEFFREYS_ALPHA
            out[i, : k[i]] = np.log((counts + alpha) / (n_samples + alpha * k[i]))
        mass = np.ones(len(out), np.float32)
        store.save(name, {"option_logits": out.astype(np.float32), "option_mass": mass})
    return store.run_dir


def record_baseline(run_dir: Path, thresholds: Path, model: str = "toy-vlm") -> Path:
    """Threshold snapshots of a stored run, as the suite records them: the model-level RAS
    (its grid evidence) and both VSI gates (its VSI evidence). Returns the model's folder."""
    from benchc.gates import ErrorBudget, GridEvidence, sidecar
    from benchc.gates.snapshot import model_slug
    from benchc.report.vsi import run_evidence
    from benchc.results.reader import read_run
    from benchc.suite.payloads import build_payload

    run = read_run(run_dir)
    folder = thresholds / model_slug(model)
    settings = {
        "dataset_fingerprint": run.manifest.get("dataset_fingerprint"),
        "image_size": run.manifest.get("settings", {}).get("image_size"),
        "seed": run.seed,
    }
    z_for = ErrorBudget(gates={"model": 1, "vsi": 2}).z
    common = dict(model=model, seed=0, z_for=z_for, n_boot=200)
    keys = [spec.condition_key(c, s) for c in run.corruptions for s in run.severities]
    cube = run.logits.reshape(len(run.ids), len(keys), -1)
    grid = GridEvidence.from_conditions(
        run.ids, run.answers, run.n_options, run.clean_logits,
        {k: cube[:, i] for i, k in enumerate(keys)},
    )  # fmt: skip
    ras = build_payload(
        grid, level="model", scope="model", names=["ras"], dataset=run.dataset_name,
        info=settings, **common,
    )  # fmt: skip
    cases = {"test_model-ras": ras}
    vsi = run_evidence(run, spec.VSI_SUPPORT)
    for name in ("insensitive_fraction", "gap"):
        cases[f"test_vsi-{name}"] = build_payload(
            vsi, level="vsi", scope="vsi", names=[name], dataset=run.dataset_name,
            info={**settings, "vsi_variant": spec.VSI_VARIANTS[spec.VSI_SUPPORT]}, **common,
        )  # fmt: skip
    for case, payload in cases.items():
        rel = sidecar.save(folder, payload.evidence)
        (folder / f"{case}.json").write_text(payload.to_json(evidence_file=rel))
    return folder
