"""The openai backend over several replicas (``openai:model@url1,url2``): requests in turn, a
retry on the next replica, nothing lost while one answers 503."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from benchc.models.client import ChatClient
from benchc.models.proxy import OpenAIProxyBackend
from benchc.models.registry import load_backend
from benchc_tests.unit.http_stub import StubHandler, running


class _Replica(StubHandler):
    """Answers 503 to its first ``fail`` requests, then echoes which replica answered."""

    def do_POST(self) -> None:
        srv = self.server
        self.rfile.read(int(self.headers["Content-Length"]))
        with srv.guard:
            srv.calls += 1
            busy = srv.calls <= srv.fail
        status, payload = (503, {"error": "busy"}) if busy else (200, {"replica": srv.name})
        data = json.dumps(payload).encode()
        self.reply(status, data)


@pytest.fixture
def replicas():
    servers = []
    for name in ("a", "b"):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), _Replica)
        srv.name, srv.calls, srv.fail, srv.guard = name, 0, 0, threading.Lock()
        servers.append(srv)
    with running(servers[0]), running(servers[1]):
        yield servers


def _urls(servers) -> list[str]:
    return [f"http://127.0.0.1:{s.server_address[1]}/v1" for s in servers]


def test_requests_take_the_replicas_in_turn(replicas):
    client = ChatClient(_urls(replicas), concurrency=2)
    answers = [client.post({"model": "m"}, f"q{i}")["replica"] for i in range(10)]
    assert sorted(answers) == ["a"] * 5 + ["b"] * 5
    assert [s.calls for s in replicas] == [5, 5]
    assert sum(client.answered.values()) == 10 and not client.retried


def test_a_replica_answering_503_loses_no_request(replicas):
    replicas[0].fail = 3
    client = ChatClient(_urls(replicas), concurrency=4, backoff_s=0.001)
    threads = [threading.Thread(target=client.post, args=({"model": "m"}, f"q{i}"))
               for i in range(12)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(client.answered.values()) == 12  # every request answered
    assert client.retried[client.urls[0]] == 3  # each 503 retried, on the other replica
    assert replicas[0].calls + replicas[1].calls == 15


def test_the_model_spec_names_several_replicas(replicas):
    urls = _urls(replicas)
    backend = load_backend(f"openai:tiny@{urls[0]},{urls[1]}/")
    assert isinstance(backend, OpenAIProxyBackend)
    assert backend.base_urls == urls and backend.client.urls[1] == f"{urls[1]}/chat/completions"
    one = OpenAIProxyBackend("tiny", urls[0])
    assert one.fingerprint.startswith(f"openai:tiny@{urls[0]}:")  # one URL: as before
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAIProxyBackend("tiny", f"{urls[0]},ftp://x")
