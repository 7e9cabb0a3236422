"""``benchmarks/checkpoint_zoo.py`` still works end to end, on a miniature configuration (a
small testbed, one cell, two resamples, one strength per edit): every weight edit is written as
a checkpoint folder that loads with ``from_pretrained``, runs through the suite's model path and
the real gates, and gets its row; the reference never fails against itself. Opt-in (``-m zoo``,
its own ``.ci/run`` line); docs/measurements.md's table is the full run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from benchc.testing.dev.checkpoints import EDITS, edit, weight_change, write_checkpoint

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "fixtures" / "tiny-vlm"


def _script(name: str, *args: str) -> tuple[str, list[str]]:
    """``benchmarks/<name>`` run as a user runs it; its output and its table rows."""
    cmd = [sys.executable, str(REPO / "benchmarks" / name), *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("| ") and "| kind |" not in ln]
    return out.stdout, rows


def _zoo_script(name: str, tmp_path: Path) -> tuple[str, list[str]]:
    """A zoo script on the miniature: 16 samples, fog-3, two resamples, one rung per edit."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    save_jsonl(generate(16, 3), tmp_path / "testbed")
    return _script(
        name, "--resamples", "2", "--quick", "--corruptions", "fog", "--severities", "3",
        "--dataset", str(tmp_path / "testbed"), "--results-dir", str(tmp_path / "results"),
    )  # fmt: skip


@pytest.mark.zoo
def test_checkpoint_zoo_runs_every_edit_through_the_gates(tmp_path):
    stdout, rows = _zoo_script("checkpoint_zoo.py", tmp_path)
    names = {r.split("|")[1].strip() for r in rows}
    assert {e.name for e in EDITS} | {"bfloat16 inference", "batch size 1"} <= names
    reference = next(r for r in rows if r.startswith("| reference (itself)"))
    assert reference.split("|")[10:13] == [" 0 ", " 0 ", " 2 "]  # FAIL, UNRESOLVED, PASS
    assert "# edits losing >= 0.03" in stdout and "# benign variants:" in stdout
    # the option-order floors' calibration, the held-out variant reported against them
    assert "re-saved in bfloat16 (held out)" in stdout
    assert "| model | circular_accuracy |" in stdout


@pytest.mark.zoo
def test_the_sequential_zoo_gates_every_variant_with_each_design(tmp_path):
    """``benchmarks/sequential_zoo.py`` on the miniature: every variant gated by the fixed
    design and by 3 and 5 looks through the engine's verdict; the reference against itself
    (bit-identical) PASSes at look 1 of each sequential design, spending that look's samples."""
    stdout, rows = _zoo_script("sequential_zoo.py", tmp_path)
    assert "look sizes 3: [6, 11, 16], 5: [4, 7, 10, 13, 16]" in stdout
    names = {r.split("|")[1].strip() for r in rows}
    assert {e.name for e in EDITS} | {"bfloat16 inference"} <= names
    cols = [c.strip() for c in next(r for r in rows if r.startswith("| reference")).split("|")]
    # fixed F/U/I/P, 3 looks F/U/I/P and passes, 5 looks F/U/I/P, passes and where it stopped
    assert cols[7:12] == ["0/0/0/2", "0.38", "0/0/0/2", "0.25", "1: 2"]
    assert "mean forward passes at 5 looks" in stdout and "# targets missed:" in stdout


@pytest.mark.zoo
def test_option_order_scores_every_variant_under_every_rotation(tmp_path):
    """``benchmarks/option_order.py`` on the miniature: each variant, the position-biased
    fixed-order fine-tune included (a real checkpoint folder), is scored under every rotation;
    the reference against itself moves no figure, and the rotations' cost is stated."""
    stdout, rows = _script(
        "option_order.py", "--limit", "12", "--corruptions", "fog", "--quick",
        "--results-dir", str(tmp_path / "results"),
    )  # fmt: skip
    kinds = [r.split("|")[2].strip() for r in rows]
    assert kinds.count("position edit") == 1 and "content edit" in kinds
    same = next(r for r in rows if r.startswith("| batch size 1"))
    assert "(+0.000, z +0.0)" in same  # paired changes printed beside each figure
    assert "4 with every rotation (4x)" in stdout and "rotations " in stdout


@pytest.mark.zoo
def test_a_weight_edit_is_a_real_checkpoint_written_once_and_reproducibly(tmp_path):
    from safetensors.numpy import load_file
    from transformers import AutoModelForImageTextToText

    e = edit("vision tower quantised (bits)")
    a = write_checkpoint(MODEL, tmp_path / "a", e, 4)
    b = write_checkpoint(MODEL, tmp_path / "b", e, 4)
    stamp = (a / "model.safetensors").stat().st_mtime_ns
    assert write_checkpoint(MODEL, a, e, 4) == a  # the same recipe: reused, not rewritten
    assert (a / "model.safetensors").stat().st_mtime_ns == stamp
    wa, wb = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert all(np.array_equal(wa[k], wb[k]) for k in wa)  # seeded: the same bytes
    # int4: every tower linear weight sits on a 15-level grid per output channel
    w = wa["vision_tower.encoder.layers.0.mlp.fc1.weight"]  # the checkpoint's own key names
    scale = np.abs(w).max(axis=1, keepdims=True) / 7
    assert np.allclose(w / scale, np.round(w / scale), atol=1e-4)
    untouched = "language_model.model.layers.0.mlp.up_proj.weight"
    assert np.array_equal(wa[untouched], load_file(str(MODEL / "model.safetensors"))[untouched])
    assert 0 < weight_change(MODEL, a) < 0.1
    AutoModelForImageTextToText.from_pretrained(a)  # loads like any release
