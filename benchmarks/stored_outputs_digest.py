"""The stored outputs of the embedded model and of every tiny architecture family, as digests:
the check that a refactor of the model path changed no number (issue 41).

Runs the real suite (``pytest benchc_tests/suite`` in a fresh process, the results store
included) on the embedded model (``fixtures/tiny-vlm``, the default testbed) over a small grid,
and on each family of :mod:`benchc.testing.dev.tiny_families` built into a folder (the
architecture matrix's ``--model=<folder>`` path) over 2 cells of 4 samples, then prints the
sha256 of every array of every stored ``.npz`` file. ``.npz`` files are zip archives with
write times inside, so the digest is of the arrays (name, dtype, shape, bytes), not of the file.

    python benchmarks/stored_outputs_digest.py                 # print the digests as JSON
    python benchmarks/stored_outputs_digest.py --write         # record benchmarks/...json
    python benchmarks/stored_outputs_digest.py --check         # compare with the recorded ones
    python benchmarks/stored_outputs_digest.py --only=embedded,llava --check

``benchc_tests/unit/test_stored_outputs.py`` (``-m slow``) runs ``--check``. One thread
(``OMP_NUM_THREADS=1``) so the floating-point sums are the same on every machine size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).with_suffix(".json")
MODEL = ROOT / "fixtures" / "tiny-vlm"
SUITE = ROOT / "benchc_tests" / "suite"
#: The embedded model's grid (its whole default dataset, VSI included).
EMBEDDED_ARGS = ("--corruptions=fog,pixelate", "--severities=1,3")
#: Each family's run: the architecture matrix's suite run (4 samples x 2 cells).
FAMILY_ARGS = (
    "--corruptions=gaussian_noise,pixelate",
    "--severities=2",
    "--image-size=64",
    "--batch-size=4",
)


def array_digest(path: Path) -> str:
    """sha256 over every array of an ``.npz`` (sorted by name): name, dtype, shape, bytes."""
    h = hashlib.sha256()
    with np.load(path, allow_pickle=False) as data:
        for name in sorted(data.files):
            arr = np.ascontiguousarray(data[name])
            h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
            h.update(arr.tobytes())
    return h.hexdigest()


def store_digests(results: Path) -> dict[str, str]:
    """``<model>/<dataset>/<condition>.npz`` -> digest for every finished ``.npz`` of every run
    under ``results`` (a run folder's ``-<run key digest>`` dropped from the key)."""
    out: dict[str, str] = {}
    for path in sorted(results.rglob("*.npz")):
        rel = path.relative_to(results)
        if ".parts" in rel.parts:
            continue
        parts = list(rel.parts)
        if len(parts) == 3:  # <model>/<dataset>-<digest12>/<name>.npz
            parts[1] = parts[1].rpartition("-")[0] or parts[1]
        out["/".join(parts)] = array_digest(path)
    return out


def _suite(work: Path, *args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(SUITE),
        "-n",
        "0",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        f"--rootdir={ROOT}",
        f"--results-dir={work / 'results'}",
        f"--cache-dir={work / 'cache'}",
        f"--thresholds-dir={work / 'thresholds'}",
        "--snapshot-update",
        *args,
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 1: a gate failed; the stored arrays still count
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-4000:]}")


def embedded(work: Path) -> dict[str, str]:
    _suite(work, f"--model={MODEL}", *EMBEDDED_ARGS)
    return store_digests(work / "results")


def family(name: str, work: Path) -> dict[str, str]:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate
    from benchc.testing.dev.tiny_families import build

    folder = build(name, work / "model" / name)
    data = work / "data"
    save_jsonl(generate(4, 11), data)
    _suite(work, f"--model={folder}", f"--dataset={data}", *FAMILY_ARGS)
    return store_digests(work / "results")


def targets() -> list[str]:
    from benchc.testing.dev.tiny_families import FAMILIES

    return ["embedded", *sorted(FAMILIES)]


def compute(only: list[str] | None = None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for name in only or targets():
        with tempfile.TemporaryDirectory(prefix=f"benchc-digest-{name}-") as tmp:
            work = Path(tmp)
            out[name] = embedded(work) if name == "embedded" else family(name, work)
        if not out[name]:
            raise RuntimeError(f"{name}: the run stored no array")
        print(f"{name}: {len(out[name])} stored files", file=sys.stderr, flush=True)
    return out


def compare(got: dict[str, dict[str, str]], want: dict[str, dict[str, str]]) -> list[str]:
    """Every difference, one line each (empty: byte-identical)."""
    lines = []
    for name, files in got.items():
        ref = want.get(name)
        if ref is None:
            lines.append(f"{name}: no recorded digests")
            continue
        for key in sorted(set(files) | set(ref)):
            if files.get(key) != ref.get(key):
                lines.append(f"{name}/{key}: {ref.get(key)} -> {files.get(key)}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated: embedded and/or family names")
    parser.add_argument("--write", action="store_true", help=f"record into {REFERENCE.name}")
    parser.add_argument("--check", action="store_true", help=f"compare with {REFERENCE.name}")
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    got = compute(only)
    if args.write:
        recorded = json.loads(REFERENCE.read_text()) if REFERENCE.exists() and only else {}
        REFERENCE.write_text(json.dumps({**recorded, **got}, indent=1, sort_keys=True) + "\n")
    if args.check:
        diff = compare(got, json.loads(REFERENCE.read_text()))
        print("\n".join(diff) or f"identical: {sum(map(len, got.values()))} stored files")
        return 1 if diff else 0
    if not args.write:
        print(json.dumps(got, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
