"""Issue 49 end to end: the suite against ``benchc.testing.faults`` servers. A glitchy server
gives the fault-free baseline's stored arrays byte for byte and PASS; stored rows of another
route are never kept; a candidate that can only be scored by another route than its baseline
stops before computing (exit 4, both named); a permanent fault or a server that never answers
ends the run once with the infrastructure exit code (8), one error and the resume command."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path

# pytester's in-process runs unload the modules first imported inside them: httpx maps
# httpcore's errors by class, so both load out here (else a timeout escapes unmapped)
import httpcore  # noqa: F401
import httpx  # noqa: F401
import numpy as np
import pytest

from benchc.gates.states import EXIT_INFRA, EXIT_USAGE
from benchc.suite import progress
from benchc.testing.faults import FaultPlan, fault_server

pytest_plugins = ["pytester"]

FAST = "concurrency=2,backoff_s=0.01,max_backoff_s=0.05,heartbeat_s=0"


@pytest.fixture
def project(pytester, tmp_path):
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate
    from benchc_tests.unit.suite_project import make_suite_project

    samples = generate(4, 11)
    save_jsonl(samples, tmp_path / "four")
    proj = make_suite_project(pytester)
    proj.samples = samples

    def suite(srv, results: str, *extra: str, args: str = FAST, run=None):
        return (run or proj.runpytest_inprocess)(
            "suite",
            f"--model=openai:faulty@{srv.base_url}",
            f"--model-args={args}",
            f"--dataset={tmp_path / 'four'}",
            "--corruptions=pixelate",
            "--severities=2",
            f"--results-dir={tmp_path / results}",
            f"--cache-dir={tmp_path / 'cache'}",
            f"--thresholds-dir={tmp_path / 'thresholds'}",
            "-p",
            "no:randomly",
            *extra,
        )

    proj.suite = suite
    return proj


def _arrays(results: Path) -> dict[str, bytes]:
    from benchc.results.reader import find_runs

    (run,) = find_runs(results)
    out = {}
    for path in sorted(run.glob("*.npz")):
        with np.load(path) as npz:
            out.update({f"{path.stem}/{k}": npz[k].tobytes() for k in npz.files})
    return out


def test_glitches_pass_with_the_baselines_bytes_and_a_route_mismatch_stops(
    project, tmp_path
) -> None:
    with fault_server() as clean:
        project.suite(clean, "base", "--snapshot-update").assert_outcomes(passed=19)
    manifest = json.loads(next((tmp_path / "thresholds").rglob("baseline.manifest")).read_text())
    assert manifest["option_access"] == "logprobs"
    reference = _arrays(tmp_path / "base")

    # the probe's answer without logprobs (and each of sample 0's first answers): retried
    first = project.samples[0].question
    with fault_server(FaultPlan("no_logprobs", 1.0, only=first)) as srv:
        result = project.suite(srv, "glitch")
        assert result.ret == 0, result.stdout.str()
        assert "failed" not in result.parseoutcomes()
        assert srv.injected["no_logprobs"] >= 2
        assert _arrays(tmp_path / "glitch") == reference
        result.stdout.fnmatch_lines(["*retries by cause: * content: no logprobs*"])

        # a folder whose rows a fault produced (the old route switch): dropped, recomputed
        from benchc.results.reader import find_runs
        from benchc.results.store import atomic_save_npz, load_npz, manifest_checksum

        (run,) = find_runs(tmp_path / "glitch")
        meta = json.loads((run / "manifest.json").read_text())
        meta["option_access"] = "sampling"
        meta["checksum"] = manifest_checksum(meta)
        (run / "manifest.json").write_text(json.dumps(meta))
        rows = load_npz(run / "clean.npz")
        atomic_save_npz(run / "clean.npz", {**rows, "option_logits": -rows["option_logits"]})
        srv.replan(FaultPlan("500", 0.3, retry_after="0"))  # the same URL (run key), flaky
        result = project.suite(srv, "glitch")
        assert result.ret == 0, result.stdout.str()
        assert srv.injected["500"] >= 1
        assert _arrays(tmp_path / "glitch") == reference
        result.stdout.fnmatch_lines(["*were scored by sampling, this run's route is logprobs*"])

    # a server without log-probs against the log-prob baseline: one usage error, no query
    with fault_server(FaultPlan(logprobs=False)) as sampler:
        result = project.suite(sampler, "mismatch")
    assert result.ret == EXIT_USAGE, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["benchc: usage error: * was scored by logprobs * can only be scored by sampling*"]
    )
    assert sampler.requests == 2  # the probe (re-asked once): no query was scored


@pytest.mark.parametrize(
    ("plan", "said", "workers"),
    [
        (FaultPlan("500", 1.0, repeat=None), "HTTP 500: ", 0),
        (FaultPlan("hang", 1.0, repeat=None, delay_s=20), "ReadTimeout", 0),
        pytest.param(  # multi-process, ~20 s: the slow line of .ci/run
            FaultPlan("500", 1.0, repeat=None), "HTTP 500: ", 2, marks=pytest.mark.slow
        ),
    ],
    ids=["http-500", "never-answers", "http-500-xdist"],
)
def test_a_permanent_fault_ends_the_run_once_with_the_infrastructure_code(
    project, plan, said, workers, monkeypatch
) -> None:
    """Only the second sample's requests fail (its question): the run stops at the first case
    that meets it, prints one error naming server, status, sample, condition and attempts,
    and the resume command; no other case re-sends it; exit 8, never a regression's 1."""
    target = project.samples[1]
    plan = FaultPlan(**{**plan.__dict__, "only": target.question})
    args = f"{FAST},retry_budget_s=0.6,timeout_s=0.5".replace("heartbeat_s=0", "heartbeat_s=0.2")
    waiting = io.StringIO()
    monkeypatch.setattr(progress, "STREAM", waiting)  # where liveness lines go, past capture
    # under xdist a gate run (a recording refuses workers): its baseline recorded fault-free
    mode = ("-n", str(workers)) if workers else ("--snapshot-update",)
    run = project.runpytest_subprocess if workers else None
    with fault_server(FaultPlan() if workers else plan) as srv:
        if workers:
            project.suite(srv, "base", "--snapshot-update", args=args).assert_outcomes(passed=19)
            srv.replan(plan)
        began = time.monotonic()
        result = project.suite(srv, "results", *mode, args=args, run=run)
        took = time.monotonic() - began
        sent = srv.injected[plan.kind]
    out = result.stdout.str()
    assert result.ret == EXIT_INFRA, out
    if workers:  # each worker stops at its first case that met the fault
        assert 1 <= result.parseoutcomes()["failed"] <= workers
    else:
        result.assert_outcomes(failed=1)
    if plan.kind == "hang":  # never silent while it waits
        assert "request(s) in flight, the oldest for" in waiting.getvalue()
    assert out.count("benchc: infrastructure error: ") == 1, out
    result.stdout.fnmatch_lines(
        [
            f"benchc: infrastructure error: {srv.base_url}/chat/completions: {said}*while "
            f"computing sample '{target.id}' under clean, after * attempt(s)*(exit 8)",
            "  resume (stored rows are kept): pytest *--model=openai:faulty@*"
            + ("" if workers else " --snapshot-update"),
        ]
    )
    if not workers:
        result.stdout.fnmatch_lines(["baseline faulty * is incomplete: 1 case(s) raised*"])
    assert "Traceback" not in out and "raise " not in out
    # the failing request's attempts (and at most one other request in flight beside it at
    # concurrency 2, per worker): no later case re-sent it
    assert sent == sum(srv.faulted.values()) and len(srv.faulted) <= 2 * max(1, workers)
    assert took < 30
