"""A server backend's batches sent ahead (``OpenAIProxyBackend.prepare``): the next batch's,
chunk's and condition's requests go out while the caller still collects earlier ones, so a
fleet with latency is never left idle at a boundary; what is sent ahead and then dropped is
withdrawn; every number equals :meth:`forward`'s.

The server here holds every answer until the test opens its gate, so "sent ahead" is observed
as requests arriving, never inferred from timings."""

from __future__ import annotations

import json
import threading
import time
from http.server import ThreadingHTTPServer

import numpy as np
import pytest

from benchc.models.base import Query
from benchc.models.pipeline import Lookahead
from benchc.models.proxy import OpenAIProxyBackend
from benchc_tests.unit.http_stub import StubHandler, running
from benchc_tests.unit.test_models_hf import synthetic_queries

LOGPROBS = (-0.5, -1.5, -2.0, -2.5)


class _Gated(StubHandler):
    """Counts each request on arrival, then answers a canned top-k (letter A first) once the
    server's gate is open."""

    def do_POST(self) -> None:
        srv = self.server
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with srv.lock:
            srv.arrived += 1
        srv.gate.wait(30)
        top = [{"token": t, "logprob": lp} for t, lp in zip("ABCD", LOGPROBS, strict=True)]
        content = [{"token": "A", "logprob": LOGPROBS[0], "top_logprobs": top}]
        answer = {"choices": [{"message": {"content": "A"}, "logprobs": {"content": content}}]}
        data = json.dumps(answer).encode()
        self.reply(200, data)


@pytest.fixture
def gated():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Gated)
    srv.arrived, srv.lock, srv.gate = 0, threading.Lock(), threading.Event()
    srv.daemon_threads = True
    with running(srv):
        try:
            yield srv
        finally:
            srv.gate.set()  # no handler left waiting


def _arrivals(srv, at_least: int, timeout: float = 20.0) -> int:
    """The server's arrival count once it reaches ``at_least`` (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    while srv.arrived < at_least and time.monotonic() < deadline:
        time.sleep(0.01)
    return srv.arrived


def _settled(srv, concurrency: int) -> OpenAIProxyBackend:
    """A proxy whose first query has settled what the server gives (log-probs), gate closed."""
    proxy = OpenAIProxyBackend("m", f"http://127.0.0.1:{srv.server_address[1]}/v1",
                               concurrency=concurrency)  # fmt: skip
    srv.gate.set()
    proxy.forward(synthetic_queries(1, seed=2))
    srv.gate.clear()
    srv.arrived = 0
    return proxy


def test_prepared_batches_are_sent_before_they_are_collected(gated) -> None:
    proxy = _settled(gated, concurrency=8)
    first, second = synthetic_queries(4, seed=3), synthetic_queries(4, seed=4)
    a, b = proxy.prepare(first), proxy.prepare(second)
    # both batches' requests are at the server before anyone collects the first
    assert _arrivals(gated, 8) == 8
    gated.gate.set()
    for queries, batch in ((first, a), (second, b)):
        out = proxy.forward_prepared(batch)
        again = proxy.forward(queries)
        np.testing.assert_array_equal(out.option_logits, again.option_logits)
        np.testing.assert_array_equal(out.option_mass, again.option_mass)
        np.testing.assert_allclose(out.option_logits[:, 0], LOGPROBS[0], rtol=1e-6)
    assert proxy.path_counts["logprobs"] == 1 + 4 * 4  # settle, two batches, each again


def test_a_lookahead_sends_the_next_chunk_while_this_one_is_collected(gated) -> None:
    """The suite's pipeline (:class:`Lookahead`) with a server backend: the chunk scheduled
    ahead has its requests in flight before the running chunk's answers come back."""
    proxy = _settled(gated, concurrency=16)
    chunks = {("c", 0, 4): synthetic_queries(4, seed=5), ("d", 0, 4): synthetic_queries(4, seed=6)}
    ahead = Lookahead(proxy, batch_size=2)
    try:
        this = ahead.take(("c", 0, 4), lambda: (chunks["c", 0, 4], None), ahead=True)
        ahead.schedule(("d", 0, 4), lambda: (chunks["d", 0, 4], None))
        assert _arrivals(gated, 8) == 8  # two chunks x two batches x two queries, none answered
        gated.gate.set()
        out = this.run(proxy)
        nxt = ahead.take(("d", 0, 4), lambda: pytest.fail("built ahead, not again")).run(proxy)
    finally:
        ahead.close()
    for got, ident in ((out, ("c", 0, 4)), (nxt, ("d", 0, 4))):
        want = proxy.forward(chunks[ident])
        np.testing.assert_array_equal(got.option_logits, want.option_logits)


def test_a_dropped_batch_withdraws_the_requests_it_has_not_sent(gated) -> None:
    proxy = _settled(gated, concurrency=2)
    batch = proxy.prepare(synthetic_queries(10, seed=7))
    assert _arrivals(gated, 2) == 2  # two connections busy, eight requests queued
    proxy.release(batch)
    gated.gate.set()
    time.sleep(0.3)  # what release left queued would arrive now
    assert gated.arrived == 2
    out = proxy.forward(synthetic_queries(3, seed=8))  # the connections serve on
    assert out.option_logits.shape == (3, 4) and gated.arrived == 5


def test_a_failed_check_sends_nothing_more_and_says_why(gated) -> None:
    proxy = _settled(gated, concurrency=1)
    queries = synthetic_queries(3, seed=9)
    assert isinstance(proxy.prepare(queries), list)  # one connection: sent when collected
    proxy = _settled(gated, concurrency=2)
    batch = proxy.prepare(queries)
    with pytest.raises(NotImplementedError, match="no full next-token distribution"):
        proxy.forward_prepared(batch, distribution=True)
    gated.gate.set()
    time.sleep(0.3)
    assert gated.arrived <= 2  # the one queued behind the two in flight was withdrawn


def test_before_the_server_is_known_a_batch_waits_to_be_collected() -> None:
    """Until the session's first answer settles what the server gives, nothing is sent ahead
    (that first query goes alone, as :meth:`forward` sends it)."""
    proxy = OpenAIProxyBackend("m", "http://127.0.0.1:9/v1", concurrency=8)
    queries: list[Query] = synthetic_queries(2, seed=1)
    assert proxy.prepare(queries) == queries
