"""Which VSI support a gate should read: how far each one moves under benign change.

For the embedded tiny model's real benign variants (bfloat16, batch size 1, 1e-3 weight
noise; the model runs of ``benchmarks/gate_power.py``, reused from its results store), each
support's per-sample VSI on the VSI set is compared with the reference model's (fp32, its own
batch size) measured in the same run: how many samples cross the 0.05 insensitivity threshold
(so enter or leave the low-VSI pool), the median relative change of VSI, and the Spearman rank
agreement. Fewer crossings under benign change means fewer false moves of the VSI gates.

    python benchmarks/vsi_support.py        # ~1 min once gate_power.py has run (else ~8 min)
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from gate_power import run_variant
from scipy.stats import spearmanr

from benchc import spec
from benchc.suite.config import DEFAULT_DATASET, DEFAULT_MODEL, SuiteConfig
from benchc.testing.dev import zoo

SUPPORTS = {"full": "vsi", "top50": "vsi_top50"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results-dir", type=Path, default=Path(".benchc/gate-power"))
    args = ap.parse_args()
    cfg = SuiteConfig(model=DEFAULT_MODEL, dataset=DEFAULT_DATASET, corruptions=("fog",),
                      severities=(1,), results_dir=args.results_dir)  # fmt: skip
    ref = run_variant(cfg).vsi_arrays
    benign = {
        "bfloat16": run_variant(cfg, dtype="bfloat16"),
        "batch size 1": run_variant(cfg, batch_size=1),
        "weight noise 1e-3": run_variant(cfg, hook=lambda b: zoo.weight_noise(b, 1e-3, seed=1)),
    }
    n = len(ref["vsi"])
    print(f"# VSI support under benign change: the VSI set ({n} samples), reference = fp32")
    print("| variant | support | pool (ref) | samples crossing 0.05 | median relative change "
          "| Spearman vs ref |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name, out in benign.items():
        for sup, key in SUPPORTS.items():
            a, b = ref[key].astype(np.float64), out.vsi_arrays[key].astype(np.float64)
            cross = int(((a < spec.VSI_INSENSITIVE) != (b < spec.VSI_INSENSITIVE)).sum())
            rel = np.median(np.abs(b - a) / np.maximum(a, 1e-12))
            rho = spearmanr(a, b).statistic
            print(f"| {name} | {sup} | {int((a < spec.VSI_INSENSITIVE).sum())} | {cross} "
                  f"| {rel:.2e} | {rho:.5f} |")  # fmt: skip


if __name__ == "__main__":
    main()
