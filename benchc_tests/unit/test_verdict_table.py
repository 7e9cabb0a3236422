"""Every state of the verdict table under every policy, through a real pytest process: the exit
code, the terminal, the page, report.json and JUnit agree (``-m verdicts``, its own .ci/run
line: 33 suite runs on a small grid, ~10-13 min on 2 shared cores).

The states come from real runs: the embedded model against the committed baseline (PASS),
against a baseline of a few samples, where its gates cannot fail (INCONCLUSIVE), washed out by
the degrade wrapper (FAIL),
a projector scaled by 0.8 (a real weight edit of the checkpoint zoo: UNRESOLVED), a case that
raises in the model path (CRASHED), a fault outside the model raised where the served backend
raises it (INFRASTRUCTURE ERROR), Ctrl-C after the first case (INTERRUPTED) and a baseline that
does not exist (USAGE ERROR).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from benchc.gates.states import Policy, exit_code, word
from benchc_tests.unit.test_bad_inputs import write_jsonl

pytestmark = pytest.mark.verdicts

REPO = Path(__file__).resolve().parents[2]
GRID = ["--corruptions=fog,contrast", "--severities=1,3"]
POLICIES = {
    "default": (),
    "strict": ("--strict-gates",),
    "strict-warn": ("--strict-gates", "--inconclusive=warn"),
    "fail": ("--inconclusive=fail",),
}

#: Plugins injected with ``-p``: a crash in the model path, a fault outside the model, Ctrl-C.
PLUGINS = {
    "crash_plugin": """
        import benchc.suite.cases as cases
        _cell = cases.cell_case
        def cell_case(run, key, **kw):
            if key == "contrast-3":
                raise RuntimeError("injected: the model's forward pass raised")
            return _cell(run, key, **kw)
        cases.cell_case = cell_case
    """,
    "infra_plugin": """
        import benchc.suite.cases as cases
        from benchc.errors import InfrastructureError
        _cell = cases.cell_case
        def cell_case(run, key, **kw):
            if key == "fog-3":
                raise InfrastructureError("http://127.0.0.1:9/v1", "HTTP 500", item=f"{key}",
                                          attempts=7)
            return _cell(run, key, **kw)
        cases.cell_case = cell_case
    """,
    "interrupt_plugin": """
        def pytest_runtest_logreport(report):
            if report.when == "call" and "test_cell[" in report.nodeid:
                raise KeyboardInterrupt
    """,
}


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    """A results store shared by every run, the injected plugins, and the UNRESOLVED
    candidate (the projector scaled by 0.8, written as a checkpoint folder)."""
    from benchc.suite.config import DEFAULT_MODEL
    from benchc.testing.dev.checkpoints import edit, write_checkpoint

    root = tmp_path_factory.mktemp("verdicts")
    plugins = root / "plugins"
    plugins.mkdir()
    for name, body in PLUGINS.items():
        (plugins / f"{name}.py").write_text(textwrap.dedent(body))
    projector = root / "projector-0.8"
    write_checkpoint(Path(DEFAULT_MODEL), projector, edit("projector scaled down"), 0.2)
    # a baseline of a few samples: its gates cannot fail there (INCONCLUSIVE)
    few = write_jsonl(root / "few")
    w = {"root": root, "plugins": plugins, "projector": projector, "few": few}
    record = [f"--dataset={few}", f"--thresholds-dir={root / 'thr'}", "--baseline=few"]
    proc, _ = _run(w, "record-few", "default", [*record, "--snapshot-update"])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return w


#: state -> the arguments of the run that ends in it.
def _cases(w: dict) -> dict[str, list[str]]:
    return {
        "pass": ["--limit=100"],
        "inconclusive": [
            f"--dataset={w['few']}",
            f"--thresholds-dir={w['root'] / 'thr'}",
            "--baseline=few",
        ],
        "fail": ["--limit=100", "--benchc-degrade=damp=0.3"],
        "unresolved": [
            f"--model={w['projector']}",
            "--baseline=tiny-vlm",
            "--corruptions=gaussian_noise",
            "--severities=1,3,5",
        ],
        "crashed": ["--limit=100", "-p", "crash_plugin"],
        "infra": ["--limit=100", "-p", "infra_plugin"],
        "interrupted": ["--limit=100", "-p", "interrupt_plugin"],
        "usage": ["--limit=100", "--baseline=no-such-release"],
    }


def _run(
    w: dict, state: str, policy: str, case: list[str] | None = None
) -> tuple[subprocess.CompletedProcess, Path]:
    out = w["root"] / f"{state}-{policy}"
    case = _cases(w)[state] if case is None else case
    args = [sys.executable, "-m", "pytest", "benchc_tests/suite", "-p", "no:cacheprovider",
            *GRID, *case, *POLICIES[policy], f"--results-dir={w['root'] / 'results'}",
            f"--report={out}", f"--junitxml={out / 'junit.xml'}"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(w["plugins"]), str(REPO)]),
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return proc, out


def _junit_verdict(path: Path) -> str | None:
    if not path.is_file():
        return None
    for prop in ET.parse(path).getroot().iter("property"):
        if prop.get("name") == "benchc.verdict":
            return prop.get("value")
    return None


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize(
    "state",
    ["pass", "inconclusive", "fail", "unresolved", "crashed", "infra", "interrupted", "usage"],
)
def test_every_output_says_the_same_verdict(world, state, policy):
    proc, out = _run(world, state, policy)
    flags = POLICIES[policy]
    mode = next((f.split("=")[1] for f in flags if f.startswith("--inconclusive=")), None)
    want = exit_code(state, Policy("--strict-gates" in flags, mode))  # type: ignore[arg-type]
    text = proc.stdout + proc.stderr
    assert proc.returncode == want, text[-4000:]
    if state == "usage":  # the run could not start: one error, no page, nothing says PASS
        assert "no baseline 'no-such-release'" in text and "PASS" not in text
        assert not (out / "report.json").exists()
        return
    headline = f"\n{word(state)}:"  # the summary's first verdict line
    assert headline in proc.stdout, proc.stdout[-4000:]
    assert "\nPASS" not in proc.stdout or state == "pass"
    doc = json.loads((out / "report.json").read_text())
    assert doc["overall"]["state"] == state and doc["overall"]["exit_code"] == want
    assert doc.get("mode") != "compare"
    assert f'data-state="{state}"' in (out / "report.html").read_text()
    assert _junit_verdict(out / "junit.xml") == state
    if state in ("interrupted", "infra"):  # what finished, and how to resume
        assert doc["overall"]["progress"]["resume"].startswith("pytest benchc_tests/suite")
