"""Issue 49's acceptance measurement: under 20 % transient faults of each kind, the suite's
stored arrays are byte-identical to a fault-free run's.

One loopback :class:`benchc.testing.faults.FaultServer` (answers a pure function of the decoded
pixels and the question, log-probs served) stands in for vLLM behind a load balancer. The whole
suite (``pytest benchc_tests/suite --snapshot-update``, one process) records a synthetic
dataset of ``--samples`` samples under ``--corruptions`` x ``--severities`` (about 240 requests
at the defaults, as in the issue) once fault-free, then once per fault kind with 20 % of
request bodies faulted on their first attempt (``down``: every request dropped for the first
3 s, a restart). Each run's stored ``.npz`` arrays are compared byte for byte with the
fault-free run's; the run's exit code, requests, faults injected and retries by cause are
printed. Exit 1 when any run differs or fails.

    python benchmarks/bench_faults.py [--samples 24] [--rate 0.2]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchc.testing.faults import FaultPlan, fault_server  # noqa: E402

ARGS = "concurrency=4,backoff_s=0.05,max_backoff_s=0.5,timeout_s=1"


def plans(rate: float) -> dict[str, FaultPlan]:
    return {
        "500": FaultPlan("500", rate),
        "500 + Retry-After": FaultPlan("500", rate, retry_after="0"),
        "503": FaultPlan("503", rate),
        "429 + Retry-After": FaultPlan("429", rate, retry_after="0.1"),
        "dropped connection": FaultPlan("drop", rate),
        "malformed JSON": FaultPlan("malformed", rate),
        "slow (2 s > timeout_s 1)": FaultPlan("slow", rate, delay_s=2.0),
        "no logprobs": FaultPlan("no_logprobs", rate),
        "no letter in the top-k": FaultPlan("no_letter", rate),
        "restart (down 3 s)": FaultPlan("down", delay_s=3.0),
    }


def stored(results: Path) -> dict[str, bytes]:
    """Every stored array of the run under ``results``, by file and key, as bytes."""
    (manifest,) = results.rglob("manifest.json")
    out = {}
    for path in sorted(manifest.parent.glob("*.npz")):
        with np.load(path) as npz:
            out.update({f"{path.stem}/{k}": npz[k].tobytes() for k in npz.files})
    return out


def run(srv, root: Path, tag: str, args: argparse.Namespace) -> tuple[int, str, float]:
    cmd = [sys.executable, "-m", "pytest", "benchc_tests/suite", "-q", "-n", "0",
           "-p", "no:cacheprovider", "-p", "no:randomly", f"--model=openai:faults@{srv.base_url}",
           f"--model-args={ARGS}", f"--dataset={root / 'data'}",
           f"--corruptions={args.corruptions}", f"--severities={args.severities}",
           f"--results-dir={root / tag}", f"--cache-dir={root / 'cache'}",
           f"--thresholds-dir={root / ('thresholds-' + tag)}", "--snapshot-update",
           "--progress=off"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    began = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr, time.perf_counter() - began


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=24)
    parser.add_argument("--rate", type=float, default=0.2)
    parser.add_argument("--corruptions", default="gaussian_noise,fog,pixelate")
    parser.add_argument("--severities", default="1,3")
    args = parser.parse_args()
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    bad = 0
    with tempfile.TemporaryDirectory() as tmp, fault_server() as srv:
        root = Path(tmp)
        save_jsonl(generate(args.samples, 49), root / "data")
        code, out, wall = run(srv, root, "reference", args)
        if code != 0:
            print(out[-3000:])
            return 1
        reference = stored(root / "reference")
        print(f"fault-free: exit 0, {srv.requests} requests, {len(reference)} arrays, {wall:.1f} s")
        for i, (name, plan) in enumerate(plans(args.rate).items()):
            srv.replan(plan)
            srv.injected.clear()
            requests = srv.requests
            code, out, wall = run(srv, root, f"run{i}", args)
            same = code == 0 and stored(root / f"run{i}") == reference
            bad += not same
            causes = re.findall(r"retries by cause: (.*)", out)
            print(
                f"{name:26s} exit {code}, {srv.requests - requests:4d} requests, "
                f"{sum(srv.injected.values()):3d} faults injected, retries: "
                f"{causes[0] if causes else 'none'}; stored arrays "
                f"{'byte-identical' if same else 'DIFFER'} ({wall:.1f} s)"
            )
            if code != 0:
                print(out[-2000:])
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
