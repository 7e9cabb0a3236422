"""The stored outputs of the embedded model and of every tiny architecture family, recorded: the
check that a refactor of the model path changed no number (issue 41).

Runs the real suite (``pytest benchc_tests/suite`` in a fresh process, the results store
included) on the embedded model (``fixtures/tiny-vlm``, the default testbed) over a small grid,
and on each family of :mod:`benchc.testing.dev.tiny_families` built into a folder (the
architecture matrix's ``--model=<folder>`` path) over 2 cells of 4 samples, and reads back every
array of every stored ``.npz`` file (``.npz`` files are zip archives with write times inside, so
what counts is the arrays: name, dtype, shape, bytes).

The last bits of a float depend on the machine as well as on the code: torch's and oneDNN's
kernels are chosen by the CPU's instruction sets (AVX2, AVX-512, AMX), and library releases
reorder sums. So the record holds two things:

- ``stored_outputs_digest.json``: the machine it was recorded on (:func:`numerics`) and the
  sha256 of every stored file's arrays;
- ``stored_outputs_reference.npz``: the arrays themselves.

``--check`` on a machine whose :func:`numerics` equal the recorded ones demands every array
byte-identical. On any other machine it demands what a different machine can promise: every
integer, boolean and string array equal, every float array within :data:`FLOAT_TOLERANCE` of its
largest magnitude (measured: forcing this machine's kernels to AVX2 moves floats by at most
1.3e-6 of that magnitude, 7x inside the tolerance), and says which of the two it checked.

    python benchmarks/stored_outputs_digest.py                 # print the digests as JSON
    python benchmarks/stored_outputs_digest.py --write         # record both files
    python benchmarks/stored_outputs_digest.py --check         # compare with the record
    python benchmarks/stored_outputs_digest.py --only=embedded,llava --check

Before a refactor of the model path: ``--write`` on unchanged main; after it: ``--check`` on the
same machine (byte-identical). ``benchc_tests/unit/test_stored_outputs.py`` (``-m
architectures``) runs the check. One thread (``OMP_NUM_THREADS=1``) so the floating-point sums
do not depend on the machine's size.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).with_suffix(".json")
ARRAYS = REFERENCE.with_name("stored_outputs_reference.npz")
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
#: On another machine a float may move by this fraction of its array's largest magnitude (at
#: least 1): about 80 float32 ulps, where a change of the code moves numbers by far more.
FLOAT_TOLERANCE = 1e-5
#: The distributions whose releases can move a stored number's last bits.
LIBRARIES = (
    "torch",
    "numpy",
    "scipy",
    "transformers",
    "pillow",
    "opencv-python",
    "imagecorruptions-imaug",
    "scikit-image",
)

#: One stored run: ``<model>/<dataset>/<name>.npz`` -> array name -> array.
Stored = dict[str, dict[str, np.ndarray]]


def numerics() -> dict[str, str]:
    """What beside the code decides a stored float's last bits: the libraries' versions,
    torch's CPU kernel level, the CPU's model and vector instruction sets."""
    import torch

    from benchc.provenance import installed_version

    out = {"python": platform.python_version(), "machine": platform.machine()}
    for name in LIBRARIES:
        out[name] = installed_version(name) or "-"
    out["torch_cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    model, flags = "", set()
    cpuinfo = Path("/proc/cpuinfo")
    for line in cpuinfo.read_text().splitlines() if cpuinfo.exists() else ():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and not model:
            model = value.strip()
        elif key.strip() == "flags":
            flags |= {f for f in value.split() if f.startswith(("avx", "amx", "fma", "f16c"))}
    out["cpu"] = model or platform.processor()
    out["cpu_isa"] = " ".join(sorted(flags))
    return out


def array_digest(arrays: dict[str, np.ndarray]) -> str:
    """sha256 over a stored file's arrays (sorted by name): name, dtype, shape, bytes."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = np.ascontiguousarray(arrays[name])
        h.update(f"{name}|{arr.dtype.str}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def read_store(results: Path) -> Stored:
    """Every finished ``.npz`` of every run under ``results``, its arrays read (a run folder's
    ``-<run key digest>`` dropped from the key)."""
    out: Stored = {}
    for path in sorted(results.rglob("*.npz")):
        rel = path.relative_to(results)
        if ".parts" in rel.parts:
            continue
        parts = list(rel.parts)
        if len(parts) == 3:  # <model>/<dataset>-<digest12>/<name>.npz
            parts[1] = parts[1].rpartition("-")[0] or parts[1]
        with np.load(path, allow_pickle=False) as data:
            out["/".join(parts)] = {name: data[name] for name in data.files}
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


def embedded(work: Path) -> Stored:
    _suite(work, f"--model={MODEL}", *EMBEDDED_ARGS)
    return read_store(work / "results")


def family(name: str, work: Path) -> Stored:
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate
    from benchc.testing.dev.tiny_families import build

    folder = build(name, work / "model" / name)
    data = work / "data"
    save_jsonl(generate(4, 11), data)
    _suite(work, f"--model={folder}", f"--dataset={data}", *FAMILY_ARGS)
    return read_store(work / "results")


def targets() -> list[str]:
    from benchc.testing.dev.tiny_families import FAMILIES

    return ["embedded", *sorted(FAMILIES)]


def compute(only: list[str] | None = None) -> dict[str, Stored]:
    """Each target's stored arrays, from a real suite run in a fresh process."""
    out: dict[str, Stored] = {}
    for name in only or targets():
        with tempfile.TemporaryDirectory(prefix=f"benchc-digest-{name}-") as tmp:
            work = Path(tmp)
            out[name] = embedded(work) if name == "embedded" else family(name, work)
        if not out[name]:
            raise RuntimeError(f"{name}: the run stored no array")
        print(f"{name}: {len(out[name])} stored files", file=sys.stderr, flush=True)
    return out


def digests(runs: dict[str, Stored]) -> dict[str, dict[str, str]]:
    return {
        name: {key: array_digest(arrays) for key, arrays in files.items()}
        for name, files in runs.items()
    }


def write(runs: dict[str, Stored]) -> None:
    """Record ``runs`` (merged into the record where they are a subset of the targets), with
    this machine's :func:`numerics`."""
    recorded = load() if REFERENCE.exists() and set(runs) != set(targets()) else {}
    if recorded and recorded["numerics"] != numerics():
        raise SystemExit(f"{REFERENCE.name} was recorded on another machine; --write every target")
    merged = {**recorded.get("runs", {}), **runs}
    flat = {
        f"{n}/{k}/{a}": arr
        for n, files in merged.items()
        for k, arrays in files.items()
        for a, arr in arrays.items()
    }
    np.savez_compressed(ARRAYS, **flat)
    record = {"numerics": numerics(), "digests": digests(merged)}
    REFERENCE.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def load() -> dict:
    """The record: ``numerics``, ``digests`` and the arrays as ``runs`` (target -> file -> array
    name -> array)."""
    record = json.loads(REFERENCE.read_text())
    runs: dict[str, Stored] = {}
    with np.load(ARRAYS, allow_pickle=False) as data:
        for flat in data.files:
            target, rest = flat.split("/", 1)
            key, _, name = rest.rpartition("/")
            runs.setdefault(target, {}).setdefault(key, {})[name] = data[flat]
    return {**record, "runs": runs}


def compare(got: dict[str, Stored], record: dict, *, exact: bool) -> list[str]:
    """Every difference between ``got`` and the record, one line each (empty: none). ``exact``:
    every array byte-identical (the recording machine); otherwise floats within
    :data:`FLOAT_TOLERANCE`, everything else equal."""
    lines = []
    for name, files in got.items():
        ref = record["runs"].get(name)
        if ref is None:
            lines.append(f"{name}: nothing recorded")
            continue
        for key in sorted(set(files) | set(ref)):
            if key not in files or key not in ref:
                lines.append(f"{name}/{key}: {'not stored' if key in ref else 'not recorded'}")
            elif exact:
                want = record["digests"][name][key]
                if array_digest(files[key]) != want:
                    lines.append(f"{name}/{key}: {want} -> {array_digest(files[key])}")
            else:
                lines += [f"{name}/{key}: {line}" for line in _close(files[key], ref[key])]
    return lines


def _close(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> list[str]:
    from benchc.results.store import DIGEST_KEY

    lines = []
    # The store's checksum of the file's other arrays moves with any float's last bit; the
    # arrays it covers are compared themselves.
    for name in sorted((set(got) | set(want)) - {DIGEST_KEY}):
        a, b = got.get(name), want.get(name)
        if a is None or b is None:
            lines.append(f"{name}: {'not stored' if a is None else 'not recorded'}")
        elif a.dtype != b.dtype or a.shape != b.shape:
            lines.append(f"{name}: {b.dtype}{b.shape} -> {a.dtype}{a.shape}")
        elif a.dtype.kind in "fc":
            scale = max(float(np.nanmax(np.abs(b), initial=0.0)), 1.0)
            if not np.array_equal(np.isnan(a), np.isnan(b)):
                lines.append(f"{name}: NaN at other places")
                continue
            err = float(np.nanmax(np.abs(a.astype(np.float64) - b), initial=0.0))
            if err > FLOAT_TOLERANCE * scale:
                lines.append(f"{name}: moved by {err:.3g} > {FLOAT_TOLERANCE:g} x {scale:.3g}")
        elif not np.array_equal(a, b):
            lines.append(f"{name}: {int(np.sum(a != b))} of {a.size} entries differ")
    return lines


def check(got: dict[str, Stored]) -> tuple[bool, list[str]]:
    """``(exact, differences)``: compared byte for byte when this machine's :func:`numerics` are
    the recorded ones, within tolerance otherwise."""
    record = load()
    exact = record["numerics"] == numerics()
    return exact, compare(got, record, exact=exact)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated: embedded and/or family names")
    parser.add_argument("--write", action="store_true", help=f"record into {REFERENCE.name}")
    parser.add_argument("--check", action="store_true", help=f"compare with {REFERENCE.name}")
    args = parser.parse_args(argv)
    only = args.only.split(",") if args.only else None
    got = compute(only)
    if args.write:
        write(got)
    if args.check:
        exact, diff = check(got)
        how = "byte-identical" if exact else f"within {FLOAT_TOLERANCE:g} (another machine)"
        print("\n".join(diff) or f"{how}: {sum(map(len, got.values()))} stored files")
        return 1 if diff else 0
    if not args.write:
        print(json.dumps(digests(got), indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
