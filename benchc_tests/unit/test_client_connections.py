"""The served path's connections: each request thread keeps one keep-alive connection per
replica (its own client, no pool shared by all threads), reused across requests, batches and
conditions; ``close()`` closes them and a later request opens new ones."""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import pytest

from benchc.models.client import ChatClient
from benchc_tests.unit.http_stub import StubHandler, running


class _KeepAlive(StubHandler):
    """HTTP/1.1 keep-alive; records the client port of every request."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.ports.append(self.client_address[1])
        data = b'{"choices": [{"message": {"content": "A"}}]}'
        self.reply(200, data)


@pytest.fixture
def keepalive():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _KeepAlive)
    srv.ports, srv.lock, srv.daemon_threads = [], threading.Lock(), True
    with running(srv):
        yield srv


def test_each_request_thread_reuses_its_own_connection(keepalive) -> None:
    url = f"http://127.0.0.1:{keepalive.server_address[1]}/v1"
    client = ChatClient(url, concurrency=3)
    barrier = threading.Barrier(3)

    def thread_posts() -> None:
        barrier.wait()  # all three threads at once: three connections, not one
        for i in range(10):
            client.post({"model": "m", "i": i}, "q")

    threads = [threading.Thread(target=thread_posts) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keepalive.ports) == 30
    assert len(set(keepalive.ports)) == 3  # one connection a thread, kept alive
    client.post({"model": "m"}, "q")  # the main thread: its own connection
    assert len(set(keepalive.ports)) == 4
    client.close()
    client.post({"model": "m"}, "q")  # closed: a new one
    assert len(set(keepalive.ports)) == 5 and len(keepalive.ports) == 32
    client.close()
