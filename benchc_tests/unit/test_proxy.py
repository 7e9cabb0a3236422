"""The sampling proxy over real HTTP: a local server answering with the embedded tiny VLM."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchc.models.base import Query
from benchc.models.parse import parse_letter
from benchc.models.proxy import OpenAIProxyBackend, ProxyError, image_data_url, jeffreys
from benchc.models.serve import ChatServer, build_server
from benchc_tests.unit.test_models_hf import synthetic_queries, tiny_backend_cached

OPTIONS = ("red", "blue", "green", "yellow")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", 1),
        (" b.\n", 1),
        ("(C)", 2),
        ("C\n\nBecause the shape is green.", 2),
        ("a\nbecause", 0),
        ("**D**", 3),
        ("A. red", 0),
        ("C) green", 2),
        ("B blue", 1),
        ("The answer is (C).", 2),
        ("Answer: D", 3),
        ("green", 2),
        ("Yellow.", 3),
        ("E", None),  # beyond K = 4
        ("A cat sits on the mat", None),  # article, not a letter
        ("answer is A or answer is B", None),  # contradictory
        ("", None),
        ("<|im_end|>", None),
        ("B red", None),  # letter and option text disagree
    ],
)
def test_parse_letter_rules(reply: str, expected: int | None) -> None:
    assert parse_letter(reply, OPTIONS) == expected


@given(k=st.integers(2, 26), data=st.data())
def test_parse_letter_round_trips_every_documented_form(k: int, data) -> None:
    options = tuple(f"option number {i}" for i in range(k))
    i = data.draw(st.integers(0, k - 1))
    letter = chr(ord("A") + i)
    for form in (letter, f"({letter})", f"{letter}.", f"{letter}. {options[i]}", options[i]):
        assert parse_letter(form, options) == i
    if k < 26:
        assert parse_letter(chr(ord("A") + k), options) is None


def test_jeffreys_smoothing() -> None:
    p = jeffreys(np.array([[3, 1, 0, 0], [0, 0, 0, 0]]))
    np.testing.assert_allclose(p[0], np.array([3.5, 1.5, 0.5, 0.5]) / 6)
    assert np.all(np.isnan(p[1]))


@pytest.fixture(scope="module")
def server():
    srv = ChatServer(tiny_backend_cached(), seed=0)
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def test_proxy_end_to_end_counts_and_determinism(server) -> None:
    proxy = OpenAIProxyBackend("tiny", server.base_url, n_samples=20, concurrency=2)
    queries = synthetic_queries(3, seed=11)
    out = proxy.forward(queries)
    assert out.letter_counts.shape == (3, 4) and out.n_unparsed.shape == (3,)
    assert np.all(out.letter_counts.sum(1) + out.n_unparsed == 20)
    np.testing.assert_allclose(out.option_mass, out.letter_counts.sum(1) / 20)
    for i in range(3):
        if out.letter_counts[i].sum() == 0:
            assert np.all(np.isnan(out.option_logits[i]))
        else:
            np.testing.assert_allclose(
                np.exp(out.option_logits[i]), jeffreys(out.letter_counts[i]), rtol=1e-6
            )
    # the trained model answers with letters: samples mostly parse and follow its argmax
    white = tiny_backend_cached().forward(queries).option_logits
    assert out.n_unparsed.sum() <= 6
    assert np.mean(np.argmax(out.letter_counts, 1) == np.nanargmax(white, 1)) >= 2 / 3
    again = proxy.forward(queries)
    np.testing.assert_array_equal(again.letter_counts, out.letter_counts)
    assert not proxy.white_box
    with pytest.raises(NotImplementedError):
        proxy.forward(queries, distribution=True)


def test_server_samples_follow_the_model_distribution(server) -> None:
    """Over 1000 replies, the share decoding to each letter matches the white-box probability."""
    backend = server.backend
    q = synthetic_queries(1, seed=3)[0]
    white = backend.forward([q]).option_logits[0]
    proxy = OpenAIProxyBackend("tiny", server.base_url)
    body = proxy.request_body(q, n=1000, seed=5)
    replies = [c["message"]["content"] for c in server.complete(body)["choices"]]
    n = len(replies)
    for j in range(len(q.options)):
        p = float(np.exp(white[j]))
        share = sum(parse_letter(r, q.options) == j for r in replies) / n
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / n) + 2 / n


class _Flaky(BaseHTTPRequestHandler):
    """Answers 503 ``fail`` times, then every choice ``"B"``; records auth headers."""

    def do_POST(self) -> None:
        srv = self.server
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        srv.auth.append(self.headers.get("Authorization"))
        srv.calls += 1
        if srv.status != 200 or srv.calls <= srv.fail:
            status = srv.status if srv.status != 200 else 503
            data = b'{"error": {"message": "busy"}}'
        else:
            status = 200
            choices = [{"index": i, "message": {"content": "B"}} for i in range(body["n"])]
            data = json.dumps({"choices": choices}).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def flaky():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    srv.calls, srv.fail, srv.status, srv.auth = 0, 0, 200, []
    thread = threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def _query() -> Query:
    return Query(np.zeros((32, 32, 3), np.uint8), "Which?", OPTIONS, id="q7")


def test_retries_with_backoff_then_succeeds_and_sends_key(flaky, monkeypatch) -> None:
    monkeypatch.setenv("BENCHC_TEST_KEY", "sekrit")
    flaky.fail = 2
    proxy = OpenAIProxyBackend(
        "m", _url(flaky), n_samples=5, backoff_s=0.01, api_key_env="BENCHC_TEST_KEY"
    )
    out = proxy.forward([_query()])
    assert flaky.calls == 3
    assert set(flaky.auth) == {"Bearer sekrit"}
    np.testing.assert_array_equal(out.letter_counts, [[0, 5, 0, 0]])
    np.testing.assert_allclose(np.exp(out.option_logits[0]), [0.5 / 7, 5.5 / 7, 0.5 / 7, 0.5 / 7])


def test_gives_up_after_retries_and_does_not_retry_client_errors(flaky) -> None:
    flaky.fail = 100
    proxy = OpenAIProxyBackend("m", _url(flaky), n_samples=2, max_retries=2, backoff_s=0.01)
    with pytest.raises(ProxyError, match=r"sample 'q7' after 3 attempts"):
        proxy.forward([_query()])
    assert flaky.calls == 3
    flaky.calls, flaky.status = 0, 401
    with pytest.raises(ProxyError, match=r"answered 401 for sample 'q7'"):
        proxy.forward([_query()])
    assert flaky.calls == 1


def test_server_rejects_requests_without_an_image(server) -> None:
    with pytest.raises(ValueError, match="exactly one image_url"):
        server.complete(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
        )
    url = image_data_url(np.zeros((32, 32, 3), np.uint8))
    assert url.startswith("data:image/png;base64,")


def test_proxy_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="temperature > 0"):
        OpenAIProxyBackend("m", "http://x", temperature=0)
    with pytest.raises(ValueError, match="base_url"):
        OpenAIProxyBackend("m", "localhost:8000")


def test_serve_command_line_builds_an_equivalent_server(server) -> None:
    """``python -m benchc.models.serve --model DIR --port 0`` (parsed in-process) serves the same
    model: same request seeds, same sampled letters as the fixture's server."""
    cli = build_server(["--model", str(server.backend.source.path), "--port", "0", "--seed", "0"])
    thread = threading.Thread(target=cli.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        assert cli.base_url.startswith("http://127.0.0.1:") and cli.base_url.endswith("/v1")
        queries = synthetic_queries(2, seed=5)
        theirs = OpenAIProxyBackend("tiny", cli.base_url, n_samples=50).forward(queries)
        ours = OpenAIProxyBackend("tiny", server.base_url, n_samples=50).forward(queries)
        np.testing.assert_array_equal(theirs.letter_counts, ours.letter_counts)
        np.testing.assert_array_equal(theirs.n_unparsed, ours.n_unparsed)
    finally:
        cli.shutdown()
        cli.server_close()
