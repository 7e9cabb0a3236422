"""Issue 49: a glitch is not a regression. Each fault mode of ``benchc.testing.faults`` against
the served backend: transient faults give the fault-free rows bit for bit, an answer that does
not fit the route is retried (the route never changes), a permanent fault is one
:class:`ServerFault` that is never re-sent, a server that never answers ends within its
deadline with liveness lines meanwhile, and a restart is ridden out."""

from __future__ import annotations

import time

import numpy as np
import pytest

from benchc.errors import InfrastructureError
from benchc.models.base import Query
from benchc.models.proxy import (
    NO_LETTER,
    NO_LOGPROBS,
    PATH_LOGPROBS,
    PATH_OUTSIDE_TOPK,
    OpenAIProxyBackend,
    ServerFault,
)
from benchc.testing.faults import FaultPlan, fault_server

OPTIONS = ("red", "green", "blue", "yellow")
FAST = dict(backoff_s=0.01, max_backoff_s=0.05, concurrency=2)


def _queries(n: int = 8) -> list[Query]:
    rng = np.random.default_rng(5)
    return [
        Query(rng.integers(0, 255, (16, 16, 3), dtype=np.uint8), f"Which colour {i}?", OPTIONS,
              id=f"s{i}")
        for i in range(n)
    ]  # fmt: skip


def _rows(plan: FaultPlan, *, top_k: int | None = None, **kw):
    with fault_server(plan) as srv:
        proxy = OpenAIProxyBackend("m", srv.base_url, n_samples=4, **{**FAST, **kw})
        out = proxy.forward(_queries(), top_k=top_k)
    return out, proxy, srv


@pytest.fixture(scope="module")
def reference():
    out, proxy, _ = _rows(FaultPlan(), top_k=5)
    assert proxy.path_counts == {PATH_LOGPROBS: 8} and not proxy.client.retry_causes
    return out


@pytest.mark.parametrize(
    ("plan", "cause"),
    [
        (FaultPlan("500", 0.3), "HTTP 500"),
        (FaultPlan("500", 0.3, retry_after="0"), "HTTP 500 (Retry-After)"),
        (FaultPlan("503", 0.3, repeat=2), "HTTP 503"),
        (FaultPlan("429", 0.3, retry_after="0.05"), "HTTP 429 (Retry-After)"),
        (FaultPlan("drop", 0.3), "connection dropped"),
        (FaultPlan("malformed", 0.3), "malformed answer"),
        (FaultPlan("slow", 0.3, delay_s=1.0), "timeout"),
        (FaultPlan("no_logprobs", 0.3), NO_LOGPROBS),
        (FaultPlan("no_letter", 0.3), NO_LETTER),
    ],
    ids=lambda v: v.kind if isinstance(v, FaultPlan) and v.retry_after is None else None,
)
def test_transient_faults_give_the_fault_free_rows_bit_for_bit(reference, plan, cause) -> None:
    out, proxy, srv = _rows(plan, top_k=5, timeout_s=0.4)
    assert srv.injected[plan.kind] >= 2  # the schedule did fault some requests
    for name in ("option_logits", "option_mass", "top_ids", "top_logprobs"):
        assert getattr(out, name).tobytes() == getattr(reference, name).tobytes(), name
    assert proxy.path_counts == {PATH_LOGPROBS: 8}
    assert proxy.client.retry_causes[cause] == srv.injected[plan.kind]
    assert proxy.client.throttled == (plan.retry_after is not None) * srv.injected[plan.kind]
    assert any(f"retries by cause: {srv.injected[plan.kind]} {cause}" in n for n in proxy.notes())


def test_the_first_answer_without_logprobs_keeps_the_logprob_route(reference) -> None:
    """The glitch the issue met first: the probe's answer lacks ``logprobs``. It is re-asked;
    the run stays on log-probs (it switched every query to sampling and FAILed 7 gates)."""
    first = _queries()[0].question
    out, proxy, srv = _rows(FaultPlan("no_logprobs", 1.0, only=first), top_k=5)
    assert srv.injected["no_logprobs"] == 1
    assert proxy.route == "logprobs" and proxy.capabilities.option_distribution == "logprobs"
    assert proxy.path_counts == {PATH_LOGPROBS: 8}
    assert out.option_logits.tobytes() == reference.option_logits.tobytes()


def test_a_server_that_never_gives_logprobs_is_scored_by_sampling() -> None:
    out, proxy, _ = _rows(FaultPlan(logprobs=False))
    assert proxy.route == "sampling" and proxy.capabilities.top_k == 0
    assert proxy.client.retry_causes == {NO_LOGPROBS: 1}  # re-asked once: the same answer
    assert out.letter_counts is not None and (out.letter_counts.sum(1) == 4).all()


def test_the_same_top_k_without_a_letter_is_the_servers_answer() -> None:
    """A letter missing from the top-k on every try is deterministic: that query takes the
    §3 sampling proxy (counted), the others stay on log-probs, the route does not change."""
    one = _queries()[3].question
    out, proxy, srv = _rows(FaultPlan("no_letter", 1.0, repeat=None, only=one))
    assert proxy.path_counts == {PATH_LOGPROBS: 7, PATH_OUTSIDE_TOPK: 1}
    assert proxy.route == "logprobs" and proxy.client.retry_causes == {NO_LETTER: 1}
    assert srv.injected["no_letter"] == 3  # asked, re-asked once (the same answer), sampled
    assert out.letter_counts[3].sum() == 4 and (out.letter_counts[[0, 1, 2, 4]] == -1).all()


def test_a_server_that_stops_giving_logprobs_ends_the_run_without_changing_route() -> None:
    one = _queries()[5].question
    with pytest.raises(ServerFault) as err:
        _rows(FaultPlan("no_logprobs", 1.0, repeat=None, only=one), content_retries=2)
    assert isinstance(err.value, InfrastructureError)
    assert err.value.item == "sample 's5'" and err.value.attempts == 3
    assert "content: no logprobs" in str(err.value) and "content_retries=2" in str(err.value)


def test_a_permanent_fault_is_one_error_and_is_never_re_sent() -> None:
    one = _queries()[2].question
    with fault_server(FaultPlan("500", 1.0, repeat=None, only=one)) as srv:
        proxy = OpenAIProxyBackend("m", srv.base_url, retry_budget_s=0.5, **FAST)
        with pytest.raises(ServerFault) as err:
            proxy.forward(_queries())
        sent = srv.injected["500"]
        with pytest.raises(ServerFault) as again:
            proxy.forward(_queries())  # another case: the kept fault, nothing sent
        assert srv.injected["500"] == sent and again.value is err.value
    text = str(err.value)
    assert text.startswith(f"{srv.base_url}/chat/completions: HTTP 500: ")
    assert "while computing sample 's2'" in text and f"after {sent} attempt(s)" in text
    assert "retry_budget_s=0.5" in text


def test_a_server_that_never_answers_ends_within_its_deadline_and_says_it_waits() -> None:
    lines: list[str] = []
    with fault_server(FaultPlan("hang", 1.0, repeat=None, delay_s=30)) as srv:
        proxy = OpenAIProxyBackend(
            "m", srv.base_url, timeout_s=0.6, retry_budget_s=1.0, heartbeat_s=0.4, **FAST
        )
        proxy.client.notify = lines.append
        began = time.monotonic()
        with pytest.raises(ServerFault, match=r"ReadTimeout.*retry_budget_s=1, timeout_s=0.6"):
            proxy.forward(_queries(2))
        took = time.monotonic() - began
    assert took < 1.0 + 0.6 + 0.5  # retry_budget_s + timeout_s, and slack
    assert lines and "1 request(s) in flight, the oldest for" in lines[0]
    assert proxy.client.retry_causes["timeout"] >= 1


def test_a_restart_is_ridden_out_by_the_time_budget(reference) -> None:
    """Every request dropped for 1.5 s (a restart): the budget, not a count, keeps retrying."""
    out, proxy, srv = _rows(FaultPlan("down", delay_s=1.5), top_k=5, retry_budget_s=5)
    assert srv.injected["down"] >= 3
    assert out.option_logits.tobytes() == reference.option_logits.tobytes()
    assert proxy.client.retry_causes["connection dropped"] == srv.injected["down"]
