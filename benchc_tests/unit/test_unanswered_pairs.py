"""A pair with no option distribution (a sampling proxy's query none of whose replies named an
option, N_valid = 0: docs/spec.md §3) stops the figures with a message naming the sample and the
condition, in the suite and in the stored-run reader, never "option logit is nan" at an array
index."""

from __future__ import annotations

import json
from http.server import ThreadingHTTPServer

import numpy as np
import pytest

from benchc.metrics.options import UnansweredPairs, require_answered
from benchc_tests.unit.http_stub import StubHandler, running

pytest_plugins = ["pytester"]

NAN = np.nan


def test_names_each_unanswered_pair_by_sample_and_condition() -> None:
    clean = np.array([[0.0, 1.0, 2.0], [NAN, NAN, NAN], [0.5, 0.1, NAN]])
    cube = np.zeros((3, 1, 2, 3))
    cube[2, ..., 2] = NAN  # sample c has K = 2: its padding is NaN, its options are not
    cube[0, 0, 1] = NAN
    with pytest.raises(UnansweredPairs) as err:
        require_answered(clean, cube, [3, 3, 2], ["a", "b", "c"], ["fog"], [1, 3])
    assert str(err.value).startswith(
        "2 of 9 (sample, condition) pairs have no option distribution: "
        "sample 'b' under clean, sample 'a' under fog-3."
    )
    assert "N_valid = 0" in str(err.value)


def test_answered_pairs_and_padding_pass() -> None:
    clean = np.array([[0.0, 1.0, NAN], [NAN, 0.0, 1.0]])  # one NaN option is still an answer
    require_answered(clean, np.zeros((2, 2, 1, 3)), [2, 3], ["a", "b"], ["fog", "snow"], [5])


def test_more_than_five_pairs_are_counted_not_listed() -> None:
    clean = np.full((8, 4), NAN)
    with pytest.raises(UnansweredPairs, match=r"sample '4' under clean and 3 more\."):
        require_answered(
            clean, np.zeros((8, 0, 1, 4)), [4] * 8, [str(i) for i in range(8)], [], [1]
        )


def test_a_case_that_raised_crashes_the_verdict_whatever_the_other_gates_say() -> None:
    from benchc.gates.verdict import Ending, Overall, conclude, decide

    passed = [{"status": "pass", "level": "model", "figure": "ras", "scope": "model"}]
    assert decide(passed).state == "pass"
    assert conclude(decide(passed)) == decide(passed)
    errored = [{"case": f"test_cell[fog-{s}]", "error": "ValueError: x"} for s in (1, 2, 3, 4)] + [
        {"case": "test_model[ras]", "error": "KeyError: 'y'"}
    ]
    overall = conclude(decide(passed), Ending(errored[::-1]))  # in any order: xdist
    assert overall.state == "crashed" and overall.exit_code == 7
    assert overall.lines() == [
        "CRASHED: 5 gated case(s) raised before their gates were checked; no verdict (the cases "
        "that did not raise cannot vouch for them)",
        "  cases that raised before their gates were checked:",
        "    - 4 case(s) raised (test_cell[fog-1], test_cell[fog-2], test_cell[fog-3] and 1 "
        "more): ValueError: x",
        "    - 1 case(s) raised (test_model[ras]): KeyError: 'y'",
    ]
    failed = [{**passed[0], "status": "fail", "baseline": 0.5, "current": 0.4, "tolerance": 0.01}]
    both = conclude(decide(failed), Ending(errored[:1]))
    assert both.headline == (
        "FAIL: 1 gate(s) failed, 1 gated case(s) raised before their gates were checked"
    )
    assert Overall.from_dict(both.to_dict()).headline == both.headline  # report.json round trip


class _Silent(StubHandler):
    """A chat server without log-probs answering "B" to every question; once ``server.silent``
    is set, its model never names an option for the question about the square's colour."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        text = json.dumps(body["messages"])
        silent = self.server.silent and "colour is the square" in text
        reply = "I cannot tell from the picture." if silent else "B"
        choices = [{"index": i, "message": {"content": reply}} for i in range(body.get("n", 1))]
        self.reply(200, json.dumps({"choices": choices}).encode())


def test_a_served_model_that_never_names_an_option_crashes_the_verdict_and_names_the_pairs(
    pytester, tmp_path
) -> None:
    """Recorded while answering, checked while silent on one sample: every gated case raises
    with the pairs named, and the verdict is FAIL (it said "INCONCLUSIVE: no gate failed",
    decided on the two VSI gates that did not raise). Recorded while silent: the baseline says
    it is incomplete (it said "every gate is defined"). The stored run's reader names the pairs
    too."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate
    from benchc.results.reader import find_runs, read_run
    from benchc_tests.unit.suite_project import make_suite_project

    data = tmp_path / "four"
    samples = generate(4, 11)
    save_jsonl(samples, data)
    silent = next(s.id for s in samples if "colour is the square" in s.question)
    project = make_suite_project(pytester)
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    srv.silent = False

    def suite(results: str, thresholds: str, *extra: str, run=project.runpytest_inprocess):
        return run(
            "suite",
            f"--model=openai:silent@http://127.0.0.1:{srv.server_address[1]}/v1",
            "--model-args=logprobs=false,concurrency=2",
            f"--dataset={data}",
            "--corruptions=pixelate",
            "--severities=2",
            f"--results-dir={tmp_path / results}",
            f"--cache-dir={tmp_path / 'cache'}",
            f"--thresholds-dir={tmp_path / thresholds}",
            "-p",
            "no:randomly",
            *extra,
        )

    said = (
        f"UnansweredPairs: 2 of 8 (sample, condition) pairs have no option distribution: sample "
        f"{silent!r} under clean, sample {silent!r} under pixelate-2."
    )
    with running(srv):
        suite("answering", "thresholds", "--snapshot-update").assert_outcomes(passed=17, skipped=2)
        srv.silent = True
        # two xdist workers: each hands its raised cases to the controller's verdict
        result = suite("silent", "thresholds", "-n", "2", run=project.runpytest_subprocess)
        result.assert_outcomes(failed=17, skipped=2)
        assert result.ret == 7  # the verdict table's CRASHED, not a regression's 1
        result.stdout.fnmatch_lines(
            [
                "CRASHED: 17 gated case(s) raised before their gates were checked*",
                "  cases that raised before their gates were checked:",
                "    - 17 case(s) raised (test_cell[[]pixelate-2[]], test_family[[]digital[]], "
                f"test_model[[]accuracy[]] and 14 more): {said}*",
            ]
        )
        assert "INCONCLUSIVE" not in result.stdout.str()
        recorded = suite("silent", "thresholds-silent", "--snapshot-update")
    recorded.assert_outcomes(failed=17, skipped=2)
    recorded.stdout.fnmatch_lines(
        [
            "baseline silent (*) is incomplete: 17 case(s) raised and recorded nothing (no later "
            "run can gate them until they are recorded):",
            f"  17 case(s) raised (*): {said}*",
        ]
    )
    out = recorded.stdout.str()
    assert "every gate is defined" not in out and "FAIL:" not in out
    (run_dir,) = find_runs(tmp_path / "silent")
    with pytest.raises(UnansweredPairs) as err:
        _ = read_run(run_dir).grid
    assert str(err.value).startswith(said.removeprefix("UnansweredPairs: "))
