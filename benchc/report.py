"""Human-readable report of one stored run: text summary and severity-trajectory plots.

It reads only the results folder (and optionally the threshold snapshots), so it works the
same after a plain run, after an xdist run (where no single process saw every cell) and from
the ``benchc report`` command long after the run.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from benchc import spec
from benchc.gates import Payload, compare
from benchc.gates.snapshot import cell_file, model_slug
from benchc.metrics import GridMetrics, compute_grid
from benchc.results.store import load_npz
from benchc.suite.figures import cell_payload


@dataclass(frozen=True)
class StoredRun:
    """A run folder: manifest, sample table, and the complete (corruption x severity) grid."""

    path: Path
    manifest: dict
    ids: list[str]
    grid: GridMetrics | None
    cells: list[str]
    severities: tuple[int, ...]
    vsi: dict[str, np.ndarray] | None
    answers: np.ndarray | None = None
    n_options: np.ndarray | None = None
    clean_logits: np.ndarray | None = None
    logits: np.ndarray | None = None  # (N, D, L, K_max), the grid's corrupted option logits


def load_run(run_dir: Path) -> StoredRun:
    """Read a results folder written by :class:`benchc.suite.run.SuiteRun`.

    The grid covers the corruptions stored at every stored severity (a partial run reports
    what it has). Raises ``FileNotFoundError`` naming the folder when it is not a run.
    """
    run_dir = Path(run_dir)
    manifest_path = run_dir / "manifest.json"
    if not manifest_path.is_file() or not (run_dir / "samples.npz").is_file():
        raise FileNotFoundError(f"{run_dir} is not a benchc results folder (no manifest/samples)")
    manifest = json.loads(manifest_path.read_text())
    samples = load_npz(run_dir / "samples.npz")
    stored = {p.stem for p in run_dir.glob("*.npz")}
    parsed = {}
    for name in stored:
        try:
            c, s = spec.parse_condition(name)
        except ValueError:
            continue
        if c is not None:
            parsed[name] = (c, s)
    severities = sorted({s for _, s in parsed.values()})
    corruptions = [
        c
        for c in spec.CORRUPTIONS
        if severities and all(spec.condition_key(c, s) in parsed for s in severities)
    ]
    grid = clean = cube = None
    cells = [spec.condition_key(c, s) for c in corruptions for s in severities]
    if cells and spec.CLEAN in stored:
        clean = load_npz(run_dir / "clean.npz")["option_logits"]
        cube = np.stack(
            [
                np.stack(
                    [
                        load_npz(run_dir / f"{spec.condition_key(c, s)}.npz")["option_logits"]
                        for s in severities
                    ],
                    axis=1,
                )
                for c in corruptions
            ],
            axis=1,
        )
        grid = compute_grid(
            clean, cube, samples["answers"], samples["n_options"], corruptions=tuple(corruptions)
        )
    # "vsi-region-blur.npz", or "vsi-region-blur.<locator>.npz" under --region-locator
    vsi_paths = sorted(run_dir.glob("vsi-region-blur*.npz"), key=lambda p: len(p.name))
    vsi_path = vsi_paths[0] if vsi_paths else run_dir / "vsi-region-blur.npz"
    return StoredRun(
        path=run_dir,
        manifest=manifest,
        ids=[str(x) for x in samples["ids"]],
        grid=grid,
        cells=cells,
        severities=tuple(severities),
        vsi=load_npz(vsi_path) if vsi_path.is_file() else None,
        answers=samples["answers"],
        n_options=samples["n_options"],
        clean_logits=clean,
        logits=cube,
    )


def _fmt(x: float) -> str:
    return "   n/a" if x is None or not math.isfinite(x) else f"{x:+.4f}"


def summary_lines(run: StoredRun, thresholds_dir: Path | None = None) -> list[str]:
    """The text summary: model-level figures, families, worst cells, VSI, gate status."""
    m = run.manifest
    lines = [
        f"benchc report: model {m.get('model_name')} ({m.get('model_fingerprint')})",
        f"dataset {m.get('dataset_name')} ({m.get('dataset_fingerprint')}), n={len(run.ids)}, "
        f"settings {json.dumps(m.get('settings', {}), sort_keys=True)}",
    ]
    g = run.grid
    if g is None:
        lines.append("no complete corruption x severity grid stored yet")
    else:
        lines += [
            f"cells: {len(run.cells)} ({len(g.corruptions)} corruptions x "
            f"{len(run.severities)} severities)",
            "",
            "model-level figures",
            f"  clean accuracy     {g.acc_clean:.4f}",
            f"  corrupt accuracy   {g.acc_corrupt:.4f}",
            f"  consistency        {g.consistency:.4f}",
            f"  RAS                {_fmt(g.ras_mean)}",
            f"  R_c                {_fmt(g.r_c)}",
            f"  R_w                {_fmt(g.r_w)}",
            f"  Mixed-cell rate    {g.mixed_cell_rate:.1f} %",
            "",
            "by family (mean over cells)      RAS      R_c      acc",
        ]
        for fam, members in spec.FAMILIES.items():
            idx = [i for i, c in enumerate(g.corruptions) if c in members]
            if not idx:
                continue
            lines.append(
                f"  {fam:<28} {_fmt(np.nanmean(g.cell_ras[idx]))} "
                f"{_fmt(np.nanmean(g.cell_r_c[idx]))} {np.nanmean(g.cell_acc[idx]):.4f}"
            )
        flat = [
            (float(g.cell_ras[i, j]), spec.condition_key(c, s))
            for i, c in enumerate(g.corruptions)
            for j, s in enumerate(run.severities)
        ]
        worst = sorted((v, k) for v, k in flat if math.isfinite(v))[:10]
        lines += ["", "lowest-RAS cells"] + [f"  {k:<24} {_fmt(v)}" for v, k in worst]
    if run.vsi is not None:
        vsi = run.vsi["vsi"]
        changed = run.vsi["top1_clean"] != run.vsi["top1_blur"]
        lines += [
            "",
            "VSI (region blur, sigma 20)",
            f"  insensitive fraction (VSI < {spec.VSI_INSENSITIVE})  "
            f"{float(np.mean(vsi < spec.VSI_INSENSITIVE)):.4f}",
            f"  median VSI            {float(np.median(vsi)):.5f}",
            f"  argmax change rate    {float(np.mean(changed)):.4f}",
            f"  regions located      {int(run.vsi['located'].sum()) if 'located' in run.vsi else 0}"
            f" of {len(vsi)}",
            f"  whole-image fallbacks {int(run.vsi['fallback'].sum())} of {len(vsi)}",
        ]
    if thresholds_dir is not None and g is not None:
        lines += ["", *gate_lines(run, Path(thresholds_dir))]
    return lines


def gate_lines(run: StoredRun, thresholds_dir: Path) -> list[str]:
    """Cell gates against the recorded snapshots, recomputed from the stored arrays."""
    slug = model_slug(str(run.manifest.get("model_name", "model")))
    folder = thresholds_dir / slug
    if not folder.is_dir():
        return [f"cell gates: no thresholds recorded in {folder}"]
    seed = int(run.manifest.get("settings", {}).get("seed", spec.DEFAULT_SEED))
    counts = {"pass": 0, "fail": 0, "improved": 0, "undefined": 0}
    failures: list[str] = []
    assert run.grid is not None
    for key in run.cells:
        path = folder / cell_file(key)
        if not path.is_file():
            continue
        baseline = Payload.from_json(path.read_text(), where=str(path))
        c, s = spec.parse_condition(key)
        i, j = run.grid.corruptions.index(c), run.severities.index(s)
        current = cell_payload(
            compute_grid(
                run.clean_logits,
                run.logits[:, i : i + 1, j : j + 1],
                run.answers,
                run.n_options,
                corruptions=(c,),
            ),
            scope=key,
            model=baseline.model,
            dataset=baseline.dataset,
            ids=run.ids,
            info={},
            seed=seed,
        )
        for o in compare(baseline, current):
            counts[o.status] += 1
            if o.status == "fail":
                failures.append(
                    f"  FAIL {o.rule.figure:<20} {key:<24} {o.baseline.value:+.4f} -> "
                    f"{o.current.value:+.4f} (tolerance {o.tolerance:.4f})"
                )
    head = ", ".join(f"{v} {k}" for k, v in counts.items())
    return [f"cell gates vs {folder}: {head}", *failures]


def plot_trajectories(run: StoredRun, out_dir: Path) -> list[Path]:
    """One PNG per figure (RAS, accuracy): a panel per family, a line per corruption."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = run.grid
    if g is None:
        return []
    written = []
    for attr, label in (("cell_ras", "mean RAS"), ("cell_acc", "accuracy")):
        fams = [f for f, cs in spec.FAMILIES.items() if any(c in g.corruptions for c in cs)]
        fig, axes = plt.subplots(1, len(fams), figsize=(3.2 * len(fams), 3.0), sharey=True)
        axes = np.atleast_1d(axes)
        values = getattr(g, attr)
        for ax, fam in zip(axes, fams, strict=True):
            for i, c in enumerate(g.corruptions):
                if c in spec.FAMILIES[fam]:
                    ax.plot(run.severities, values[i], marker="o", label=c)
            ax.set_title(fam)
            ax.set_xlabel("severity")
            ax.set_xticks(list(run.severities))
            ax.legend(fontsize=6)
        axes[0].set_ylabel(label)
        fig.suptitle(f"{run.manifest.get('model_name')}: {label} by severity")
        fig.tight_layout()
        path = out_dir / f"severity_{attr.removeprefix('cell_')}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def write_report(run_dir: Path, out_dir: Path, *, thresholds_dir: Path | None = None) -> Path:
    """Write ``<out_dir>/<model>-<run>/summary.txt`` and the plots; returns the folder."""
    run = load_run(run_dir)
    target = Path(out_dir) / f"{run_dir.parent.name}-{run_dir.name}"
    target.mkdir(parents=True, exist_ok=True)
    text = "\n".join(summary_lines(run, thresholds_dir)) + "\n"
    (target / "summary.txt").write_text(text, encoding="utf-8")
    plot_trajectories(run, target)
    return target
