"""Installed, benchc changes nothing for a repository's own tests.

benchc is an auto-loaded ``pytest11`` plugin, so it is in every pytest run of an environment
that has it. A repository whose conftest declares the generic names benchc's suite uses
(``--device``, ``--model``, ``--seed``, ...) keeps them, its tests run unchanged, the suite
answers to ``--benchc-<name>`` there, and an unrelated run builds none of the suite's state
(no torch, no dataset, no session: the start-up cost stays the option table's).
"""

from __future__ import annotations

import json
import re

import pytest

from benchc.suite.options import OPTIONS
from benchc_tests.unit.suite_project import SUITE

#: Every short name benchc's suite answers to, declared by the repository itself.
GENERIC = [opt.short for opt in OPTIONS if opt.short]

#: The kind a few names get (0 switch, 1 int, 2 string); the rest cycle through the three.
KIND = {"--seed": 0, "--model": 1, "--device": 2}

#: Modules only the suite needs: an unrelated run must not import them.
SUITE_ONLY = ("torch", "transformers", "benchc.suite.session", "benchc.data", "benchc.models")


def _foreign_conftest() -> str:
    """A conftest declaring every generic name, in the kinds repositories use (a switch, an
    int, a string with a default), and recording what the run imported."""
    lines = ["import json, sys", "", "def pytest_addoption(parser):"]
    for i, flag in enumerate(GENERIC):
        dest = "own_" + flag[2:].replace("-", "_")
        i = KIND.get(flag, i)
        if i % 3 == 0:
            lines.append(f"    parser.addoption({flag!r}, action='store_true', dest={dest!r})")
        elif i % 3 == 1:
            lines.append(f"    parser.addoption({flag!r}, type=int, default=0, dest={dest!r})")
        else:
            lines.append(f"    parser.addoption({flag!r}, default='own', dest={dest!r})")
    lines += [
        "",
        "def pytest_sessionfinish(session):",
        f"    loaded = [m for m in {SUITE_ONLY!r} if m in sys.modules]",
        "    open('loaded.json', 'w').write(json.dumps(loaded))",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def foreign(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(_foreign_conftest())
    pytester.makepyfile(
        test_own="""
        def test_own_options(request):
            assert request.config.getoption("own_device") == "cuda"
            assert request.config.getoption("own_model") == 7
        """
    )
    return pytester


def test_a_repository_keeps_its_own_options_and_imports_nothing_of_the_suite(foreign):
    assert {"--device", "--model", "--seed", "--dataset", "--limit", "--report"} <= set(GENERIC)
    result = foreign.runpytest_subprocess("-p", "no:cacheprovider", "--device=cuda", "--model=7")
    result.assert_outcomes(passed=1)
    assert json.loads((foreign.path / "loaded.json").read_text()) == []


def test_the_suite_answers_to_namespaced_options_where_the_short_ones_are_taken(foreign):
    target = foreign.mkpydir("suite")
    for path in SUITE.glob("test_*.py"):
        (target / path.name).write_text(path.read_text())
    result = foreign.runpytest_subprocess(
        "-p", "no:cacheprovider", "--collect-only", "-q", "suite", "--device=cuda",
        "--benchc-corruptions=fog", "--benchc-severities=1-2",
    )  # fmt: skip
    assert result.ret == 0, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    cells = [line for line in result.stdout.lines if "test_cell[" in line]
    assert sorted(c.split("[")[1] for c in cells) == ["fog-1]", "fog-2]"]


def test_help_names_the_namespaced_forms_and_leaves_the_repositorys_own(foreign):
    out = foreign.runpytest_subprocess("--help").stdout.str()
    assert "--benchc-model" in out and "--benchc-device" in out
    # the repository's own --device is listed once (its own), never benchc's second one
    assert len(re.findall(r"^\s+--device[ =]", out, re.M)) == 1
