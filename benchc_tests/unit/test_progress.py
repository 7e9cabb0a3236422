"""The progress line of long runs: mode by terminal, verbosity and xdist; the meter's text; the
suite's run reporting each scored batch."""

from __future__ import annotations

import pytest

from benchc.suite.progress import RunProgress, resolve_mode


@pytest.mark.parametrize(
    ("verbosity", "interactive", "worker", "mode"),
    [
        (0, True, None, "bar"),
        (1, True, None, "bar"),
        (-1, True, None, "log"),  # -q: no bar, the occasional line
        (-2, True, None, "off"),  # -qq: silent
        (0, False, None, "log"),  # a CI log
        (0, True, "gw1", "log"),  # xdist workers share the controller's stderr
    ],
)
def test_auto_mode(verbosity, interactive, worker, mode) -> None:
    assert resolve_mode("auto", verbosity=verbosity, interactive=interactive, worker=worker) == mode
    assert resolve_mode("off", verbosity=0, interactive=True, worker=None) == "off"


def test_log_lines_every_interval_with_rate_and_eta() -> None:
    now = [0.0]
    lines: list[str] = []
    p = RunProgress(1000, mode="log", write=lines.append, interval=30, clock=lambda: now[0])
    for _ in range(10):  # 16 queries per second of fake time
        now[0] += 1
        p.update(16)
    assert lines == []  # nothing before the first interval: short runs stay quiet
    for _ in range(25):
        now[0] += 1
        p.update(16)
    assert len(lines) == 1
    line = lines[0]
    assert line.startswith("benchc: 480/1000 queries [00:30<00:32, 16.00q/s]"), line
    now[0] += 31
    p.update(16)
    assert len(lines) == 2 and lines[1].startswith("benchc: 576/1000")
    p.close()


def test_without_a_total_no_eta_and_a_worker_prefix() -> None:
    now = [0.0]
    lines: list[str] = []
    p = RunProgress(
        None, mode="log", write=lines.append, interval=1, prefix="[gw3] ", clock=lambda: now[0]
    )
    now[0] = 2
    p.update(10)
    assert lines == ["[gw3] benchc: 10 queries [00:02,  5.00q/s]\n"]


def test_bar_writes_through_the_callable_after_its_delay() -> None:
    out: list[str] = []
    p = RunProgress(100, mode="bar", write=out.append)
    p.update(5)  # within tqdm's delay: nothing drawn yet
    assert not any("benchc queries" in t for t in out)
    p._bar.delay = 0  # as after the delay
    p._bar.refresh()
    assert any("benchc queries" in t and "5/100" in t for t in out)
    p.close()
    with pytest.raises(ValueError, match="progress mode"):
        RunProgress(1, mode="auto", write=out.append)


def test_suite_progress_reaches_the_terminal_past_capture(pytester, monkeypatch) -> None:
    """A suite run with --progress=log: the lines reach stderr although pytest captures the
    cases' output, and the summary states the throughput."""
    import io

    from benchc.suite import progress

    pytester.makeconftest('pytest_plugins = ["benchc.plugin"]\n')
    pytester.makepyfile(
        """
        def test_cell(benchc_run):
            benchc_run.condition("clean")
            print("captured")
        """
    )
    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)  # a line after every batch
    err = io.StringIO()
    monkeypatch.setattr(progress, "STREAM", err)
    result = pytester.runpytest_inprocess(
        "--progress=log", "-p", "no:cacheprovider", f"--results-dir={pytester.path / 'r'}"
    )
    result.assert_outcomes(passed=1)
    lines = err.getvalue().splitlines()
    assert lines and all(line.startswith("benchc: ") for line in lines)
    assert "queries [" in lines[-1] and "q/s]" in lines[-1]
    assert "captured" not in err.getvalue()
    result.stdout.fnmatch_lines(["*throughput: * queries in * s (* queries/s, in sequence)*"])


pytest_plugins = ["pytester"]
