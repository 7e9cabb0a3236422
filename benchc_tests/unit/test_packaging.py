"""The installable suite: build the wheel, install it into a fresh venv, and run
``pytest --pyargs benchc_tests.suite`` from a directory outside the checkout (the way a release
CI runs benchc in its own repository). Marked ``packaging``: its own line in ``.ci/run``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.packaging


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: int = 600) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


def test_wheel_installs_and_runs_the_suite_outside_the_checkout(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.setdefault("OMP_NUM_THREADS", "1")
    dist = tmp_path / "dist"
    # build from a copy: an in-tree build leaves build/lib behind, whose stale modules (moved or
    # deleted since) a later build of the checkout would put into its wheel
    src = tmp_path / "src"
    junk = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", ".benchc")
    for part in ("benchc", "benchc_tests"):
        shutil.copytree(REPO / part, src / part, ignore=junk)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(dist), str(src)],
        tmp_path,
        env,
    )  # fmt: skip
    (wheel,) = dist.glob("benchc-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "benchc_tests/suite/test_cells.py" in names and "benchc/plugin.py" in names
    assert "benchc/testing/serve.py" in names and "benchc/testing/degrade.py" in names
    assert "benchc/report/templates/page.html.j2" in names  # the report page's templates
    assert not any(n.startswith("benchc/testing/dev/") for n in names)  # checkout-only tooling
    assert not any(
        n.startswith(("benchc_tests/unit/", "benchc_tests/browser/", "fixtures/")) for n in names
    )

    # A fresh venv, nothing of this environment's: the wheel's declared dependencies resolve to
    # the newest versions they allow, as for a user (torch first, the machine's CPU build).
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    python = str(venv / "bin" / "python")
    _run([python, "-m", "pip", "install", "-q", "torch==2.13.0"], tmp_path, env)
    # every dependency resolved and fetched, as for a user: minutes on a busy 2-core machine
    _run([python, "-m", "pip", "install", "-q", f"{wheel}[report]"], tmp_path, env, timeout=1800)
    versions = _run([python, "-m", "pip", "list", "--format=freeze"], tmp_path, env)
    print(versions)  # what the wheel resolved to, in the test's output

    user_repo = tmp_path / "user-repo"  # outside the checkout, no conftest, no pyproject
    user_repo.mkdir()
    where = _run(
        [
            python,
            "-c",
            "import benchc, benchc_tests.suite as s; print(benchc.__file__, s.__file__)",
        ],
        user_repo,
        env,
    ).split()
    site = str(venv / "lib")
    assert all(p.startswith(site) for p in where), f"not the wheel's benchc: {where}"

    data = user_repo / "four"
    _run(
        [python, "-c", "import sys; from benchc.data import save_jsonl; "
         "from benchc.data.synthetic import generate; save_jsonl(generate(4, 5), sys.argv[1])",
         str(data)],
        user_repo,
        env,
    )  # fmt: skip
    args = [
        python, "-m", "pytest", "--pyargs", "benchc_tests.suite", "-p", "no:cacheprovider",
        f"--model={REPO / 'fixtures' / 'tiny-vlm'}", f"--dataset={data}",
        "--corruptions=gaussian_noise,pixelate", "--severities=2", "--batch-size=4",
        "--thresholds-dir=thresholds", "--results-dir=results", "--cache-dir=cache", "-q",
    ]  # fmt: skip
    recorded = _run([*args, "--snapshot-update"], user_repo, env)
    assert "21 passed" in recorded, recorded[-2000:]  # 2 cells, 2 families, 15 model, 2 VSI
    checked = _run(args, user_repo, env)
    # 4 images cannot fill the probe's five folds: the gap is UNCHECKED, said, never silent
    assert "20 passed, 1 skipped" in checked, checked[-2000:]
    assert "unchecked gates:" in checked and "- gap in vsi" in checked
    snapshot = json.loads(
        (user_repo / "thresholds" / "tiny-vlm" / "cell-pixelate-2.json").read_text()
    )
    assert snapshot["n"] == 4
    # benchc wrote only where it was told to (dot-folders belong to other pytest plugins)
    written = sorted(p.name for p in user_repo.iterdir() if not p.name.startswith("."))
    assert written == ["cache", "four", "results", "thresholds"]
    # the installed benchc renders its report page from the wheel's own templates
    report = tmp_path / "report"
    _run(
        [python, "-m", "benchc.cli", "report", "results", "--baseline", "thresholds",
         "--out", str(report), "--no-images"],
        user_repo,
        env,
    )  # fmt: skip
    page = (report / "report.html").read_text()
    assert page.count('class="report-section"') >= 9 and "no gate failed" in page
