"""The ``openai:`` backend over real HTTP: a local server answering with the embedded tiny VLM.

Top-k log-probs are checked against the white-box HF path on the same model; the sampling proxy
(docs/spec.md §3) is checked on its own (``logprobs=False``) and as the per-query fallback.
"""

from __future__ import annotations

import json
import threading
from http.server import ThreadingHTTPServer

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import spearmanr

from benchc.metrics.vsi import vsi_aligned, vsi_topk
from benchc.models.base import Query
from benchc.models.client import Verbatim, encode_body
from benchc.models.parse import parse_letter
from benchc.models.proxy import (
    PATH_LOGPROBS,
    PATH_NO_LOGPROBS,
    PATH_OUTSIDE_TOPK,
    OpenAIProxyBackend,
    ProxyError,
    RateLimiter,
    image_data_url,
    jeffreys,
    token_id,
    token_letter,
)
from benchc.testing.serve import ChatServer, build_server
from benchc_tests.unit.http_stub import StubHandler, running
from benchc_tests.unit.test_models_hf import synthetic_queries, tiny_backend_cached

pytest_plugins = ["pytester"]

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
    with running(ChatServer(tiny_backend_cached(), seed=0)) as srv:
        yield srv


def test_proxy_end_to_end_counts_and_determinism(server) -> None:
    proxy = OpenAIProxyBackend("tiny", server.base_url, n_samples=20, concurrency=2, logprobs=False)
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
    body = json.loads(encode_body(proxy.request_body(q, n=1000, seed=5)))  # as sent
    replies = [c["message"]["content"] for c in server.complete(body)["choices"]]
    n = len(replies)
    for j in range(len(q.options)):
        p = float(np.exp(white[j]))
        share = sum(parse_letter(r, q.options) == j for r in replies) / n
        assert abs(share - p) <= 4 * np.sqrt(p * (1 - p) / n) + 2 / n


class _Flaky(StubHandler):
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
        self.reply(status, data)


@pytest.fixture
def flaky():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    srv.calls, srv.fail, srv.status, srv.auth = 0, 0, 200, []
    with running(srv):
        yield srv


def _url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/v1"


def _query() -> Query:
    return Query(np.zeros((32, 32, 3), np.uint8), "Which?", OPTIONS, id="q7")


def test_retries_with_backoff_then_succeeds_and_sends_key(flaky, monkeypatch) -> None:
    monkeypatch.setenv("BENCHC_TEST_KEY", "sekrit")
    flaky.fail = 2
    proxy = OpenAIProxyBackend(
        "m",
        _url(flaky),
        n_samples=5,
        backoff_s=0.01,
        api_key_env="BENCHC_TEST_KEY",
        logprobs=False,
    )
    out = proxy.forward([_query()])
    assert flaky.calls == 3
    assert set(flaky.auth) == {"Bearer sekrit"}
    np.testing.assert_array_equal(out.letter_counts, [[0, 5, 0, 0]])
    np.testing.assert_allclose(np.exp(out.option_logits[0]), [0.5 / 7, 5.5 / 7, 0.5 / 7, 0.5 / 7])


def test_gives_up_after_retries_and_does_not_retry_client_errors(flaky) -> None:
    flaky.fail = 100
    proxy = OpenAIProxyBackend(
        "m", _url(flaky), n_samples=2, max_retries=2, backoff_s=0.01, logprobs=False
    )
    with pytest.raises(ProxyError, match=r"sample 'q7', after 3 attempt\(s\)"):
        proxy.forward([_query()])
    assert flaky.calls == 3
    with pytest.raises(ProxyError, match=r"sample 'q7', after 3 attempt\(s\)"):
        proxy.forward([_query()])  # the permanent fault is kept: nothing is re-sent
    assert flaky.calls == 3
    flaky.calls, flaky.status = 0, 401
    proxy = OpenAIProxyBackend("m", _url(flaky), n_samples=2, backoff_s=0.01, logprobs=False)
    with pytest.raises(ProxyError, match=r"HTTP 401: .*sample 'q7', after 1 attempt"):
        proxy.forward([_query()])
    assert flaky.calls == 1


def test_server_rejects_requests_without_an_image(server) -> None:
    with pytest.raises(ValueError, match="exactly one image_url"):
        server.complete(
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}
        )
    url = image_data_url(np.zeros((32, 32, 3), np.uint8))
    assert bytes(url).startswith(b"data:image/png;base64,")


def test_proxy_rejects_bad_settings() -> None:
    with pytest.raises(ValueError, match="temperature > 0"):
        OpenAIProxyBackend("m", "http://x", temperature=0)
    with pytest.raises(ValueError, match="base_url"):
        OpenAIProxyBackend("m", "localhost:8000")


def test_serve_command_line_builds_an_equivalent_server(server) -> None:
    """``python -m benchc.testing.serve --model DIR --port 0`` (parsed in-process) serves the same
    model: same request seeds, same sampled letters as the fixture's server."""
    cli = build_server(["--model", str(server.backend.source.path), "--port", "0", "--seed", "0"])
    thread = threading.Thread(target=cli.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        assert cli.base_url.startswith("http://127.0.0.1:") and cli.base_url.endswith("/v1")
        queries = synthetic_queries(2, seed=5)
        theirs = OpenAIProxyBackend("tiny", cli.base_url, n_samples=50, logprobs=False)
        ours = OpenAIProxyBackend("tiny", server.base_url, n_samples=50, logprobs=False)
        theirs, ours = theirs.forward(queries), ours.forward(queries)
        np.testing.assert_array_equal(theirs.letter_counts, ours.letter_counts)
        np.testing.assert_array_equal(theirs.n_unparsed, ours.n_unparsed)
    finally:
        cli.shutdown()
        cli.server_close()


# -- top-k log-probs: one request per query, checked against the white-box path --------------
#: Largest |logprobs path - white-box| seen by the last run (printed for the report).
MAX_DIFF: dict[str, float] = {}


def _letters_in_top20(white, ks, letters) -> np.ndarray:
    """Rows where each of the K letters has a variant in the white-box top 20."""
    rows = []
    for i, k in enumerate(ks):
        top = set(white.top_ids[i].tolist())
        rows.append(all(set(letters[c]) & top for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[:k]))
    return np.array(rows)


def test_logprobs_distributions_equal_the_white_box_over_http(server) -> None:
    queries = synthetic_queries(24, seed=13)
    tiny = tiny_backend_cached()
    white = tiny.forward(queries, top_k=20, distribution=True)
    proxy = OpenAIProxyBackend("tiny", server.base_url, concurrency=2)
    served = server.requests_served
    out = proxy.forward(queries)
    ks = [len(q.options) for q in queries]
    inside = _letters_in_top20(white, ks, tiny.letters)
    assert inside.sum() >= 20, "the trained tiny model keeps its letters in the top 20"
    assert proxy.path_counts[PATH_LOGPROBS] == inside.sum()
    assert proxy.path_counts[PATH_OUTSIDE_TOPK] == (~inside).sum()
    # one request per query on the logprobs path (vs 20 samples for the proxy)
    assert server.requests_served - served == len(queries) + (~inside).sum()
    diffs_logit, diffs_p = [], []
    for i in np.nonzero(inside)[0]:
        k = ks[i]
        # the option distribution p: within 1e-4 (a letter variant outside the top 20 carries
        # less than the 20th token's mass, which moves p by far less)
        p = np.exp(out.option_logits[i, :k]) / np.exp(out.option_logits[i, :k]).sum()
        q = np.exp(white.option_logits[i, :k]) / np.exp(white.option_logits[i, :k]).sum()
        np.testing.assert_allclose(p, q, atol=1e-4)
        np.testing.assert_allclose(out.option_mass[i], white.option_mass[i], atol=1e-4)
        diffs_p.append(np.abs(p - q).max())
        # each letter's log-prob: the white-box logsumexp over its variants in the top 20
        top = set(white.top_ids[i].tolist())
        served_variants = [[t for t in tiny.letters["ABCDEFGHIJ"[j]] if t in top] for j in range(k)]
        expected = [np.logaddexp.reduce(white.logprobs[i, ids]) for ids in served_variants]
        np.testing.assert_allclose(out.option_logits[i, :k], expected, atol=1e-4)
        diffs_logit.append(np.abs(out.option_logits[i, :k] - expected).max())
    MAX_DIFF.update(option_logits=float(max(diffs_logit)), p=float(max(diffs_p)))
    print(f"logprobs vs white-box over {inside.sum()} queries: {MAX_DIFF}")


def _text_top_k(out, decode, k: int) -> tuple[np.ndarray, np.ndarray]:
    """White-box top-k as a server names it: by token text, equal texts merged, padded."""
    ids, lps = [], []
    for row_ids, row_lp in zip(out.top_ids.tolist(), out.top_logprobs.tolist(), strict=True):
        merged: dict[str, float] = {}
        for t, lp in zip(row_ids, row_lp, strict=True):
            text = decode([t])
            merged[text] = float(np.logaddexp(merged[text], lp)) if text in merged else lp
        pairs = sorted(merged.items(), key=lambda p: (-p[1], p[0]))
        pairs += [(f"\0pad{j}", -np.inf) for j in range(k - len(pairs))]
        ids.append([token_id(t) for t, _ in pairs])
        lps.append([lp for _, lp in pairs])
    return np.array(ids, np.int64), np.array(lps, np.float32)


def test_top_k_logprobs_give_the_top_k_vsi_variant(server) -> None:
    """``forward(top_k=20)``: the served top 20 equal the white-box top 20 (named by text), so
    VSI's top-k variant (``vsi_topk`` with k = 20, labelled ``vsi_top20``) matches the
    white-box one computed on the same support."""
    tiny = tiny_backend_cached()
    clean = synthetic_queries(6, seed=17)
    dark = [Query(q.image // 4, q.question, q.options, id=q.id) for q in clean]
    proxy = OpenAIProxyBackend("tiny", server.base_url)
    served = [proxy.forward(qs, top_k=20) for qs in (clean, dark)]
    white = [
        _text_top_k(tiny.forward(qs, top_k=20), tiny.tokenizer.decode, 20) for qs in (clean, dark)
    ]
    for s_out, (w_ids, w_lps) in zip(served, white, strict=True):
        np.testing.assert_array_equal(s_out.top_ids, w_ids)
        np.testing.assert_allclose(s_out.top_logprobs, w_lps, atol=1e-5)
    served_vsi = vsi_topk(
        served[0].top_ids, served[0].top_logprobs, served[1].top_ids, served[1].top_logprobs
    )
    white_vsi = vsi_topk(white[0][0], white[0][1], white[1][0], white[1][1])
    np.testing.assert_allclose(served_vsi, white_vsi, atol=1e-4)
    assert np.all(served_vsi >= 0) and np.any(served_vsi > 0)
    with pytest.raises(NotImplementedError, match="no full next-token distribution"):
        proxy.forward(clean, distribution=True)
    with pytest.raises(NotImplementedError, match="top_k=21"):
        proxy.forward(clean, top_k=21)


def test_served_top20_estimate_ranks_samples_as_the_white_box_top20(server) -> None:
    """docs/spec.md §5: a server's ``vsi_top20 (estimated)`` (unknown probabilities estimated by
    each side's smallest returned one) ranks samples as the white-box aligned top-20 VSI (each
    side's own probabilities on the union) does."""
    tiny = tiny_backend_cached()
    clean = synthetic_queries(24, seed=19)
    dark = [Query(q.image // 3, q.question, q.options, id=q.id) for q in clean]
    proxy = OpenAIProxyBackend("tiny", server.base_url, concurrency=2)
    sc, sd = (proxy.forward(qs, top_k=20) for qs in (clean, dark))
    served = vsi_topk(sc.top_ids, sc.top_logprobs, sd.top_ids, sd.top_logprobs)
    wc, wd = (tiny.forward(qs, top_k=20, distribution=True) for qs in (clean, dark))
    white = vsi_aligned(wc.logprobs, wd.logprobs, 20)
    assert np.ptp(white) > 0
    assert spearmanr(served, white).statistic >= 0.99


def test_server_without_logprobs_falls_back_to_sampling_per_query(flaky) -> None:
    """The flaky server answers "B" without log-probs: the route probe learns that (two extra
    requests: the same answer re-asked is the server's, not a glitch), every query is scored by
    the sampling proxy, and the counts say so."""
    proxy = OpenAIProxyBackend("m", _url(flaky), n_samples=5, concurrency=1)
    out = proxy.forward([_query(), _query()])
    np.testing.assert_array_equal(out.letter_counts, [[0, 5, 0, 0], [0, 5, 0, 0]])
    assert proxy.path_counts == {PATH_NO_LOGPROBS: 2}
    assert flaky.calls == 2 + 2  # two logprobs requests, then one sampling request per query
    assert proxy.client.retry_causes == {"content: no logprobs": 1}
    with pytest.raises(NotImplementedError, match="returned no top_logprobs"):
        OpenAIProxyBackend("m", _url(flaky)).forward([_query()], top_k=5)


@pytest.mark.parametrize(
    ("token", "letter"),
    [("A", "A"), (" B", "B"), ("\u2581C", "C"), ("\u0120D", "D"), ("a", None), ("AB", None),
     ("  A", None), ("A.", None), ("", None)],
)  # fmt: skip
def test_token_letter_reads_the_spec_variants(token: str, letter: str | None) -> None:
    assert token_letter(token) == letter


def test_rate_limit_spaces_request_starts() -> None:
    import time

    limiter = RateLimiter(50.0)
    start = time.monotonic()
    for _ in range(6):
        limiter.wait()
    assert time.monotonic() - start >= 5 / 50 - 1e-3
    with pytest.raises(ValueError, match="rate_limit must be > 0"):
        OpenAIProxyBackend("m", "http://x", rate_limit=0)


def _served_suite_args(server, tmp_path, *extra: str) -> list[str]:
    """The suite's command line against the tiny server on four synthetic samples, one cell."""
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    data = tmp_path / "four"
    save_jsonl(generate(4, 11), data)
    return [
        "suite",
        f"--model=openai:tiny@{server.base_url}",
        *extra,
        f"--dataset={data}",
        "--corruptions=pixelate",
        "--severities=2",
        f"--results-dir={tmp_path / 'results'}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--thresholds-dir={tmp_path / 'thresholds'}",
        "-p",
        "no:randomly",
    ]


def test_suite_runs_an_openai_model_with_device_set(server, pytester, tmp_path) -> None:
    """``pytest --model=openai:<model>@<url> --device=cpu`` (a TypeError before): 4 samples x 1
    cell over real HTTP, the cases and model gates recorded, VSI as its top-k variant (the gap,
    with no tower to probe, UNCHECKED), and the summary says how many queries each path
    scored."""
    from benchc_tests.unit.suite_project import make_suite_project

    project = make_suite_project(pytester)
    args = _served_suite_args(
        server,
        tmp_path,
        "--device=cpu",
        "--dtype=float32",
        "--model-args=concurrency=2,rate_limit=200",
    )
    result = project.runpytest_inprocess(*args, "--snapshot-update")
    result.assert_outcomes(passed=1 + 1 + 15 + 2)  # cell, family, model, VSI (top-k variant)
    result.stdout.fnmatch_lines(
        ["*note: tiny over http://127.0.0.1:*: queries scored * by logprobs*"]
    )
    vsi = json.loads((tmp_path / "thresholds" / "tiny" / "vsi-gap.json").read_text())
    assert vsi["info"]["vsi_variant"] == "vsi_top20 (estimated)"
    assert vsi["info"]["probe"].startswith("none")
    # no tower: a larger VSI set would not help, so the remedy does not say it would; the rule
    # it prints is the snapshot's own, switched off
    out = result.stdout.str()
    (rule,) = [r for r in vsi["rules"] if r.startswith("gap:")]
    assert "no vision tower" in out and "--vsi-dataset" not in out.split("remedy:")[1]
    assert f"changing its rule to '{rule}:off'" in out
    # checked again: the gap has no vision tower to probe, so it is UNCHECKED, never silent,
    # and a failure under --strict-gates
    result = project.runpytest_inprocess(*args)
    result.assert_outcomes(passed=1 + 1 + 15 + 1, skipped=1)
    assert "unchecked gates:\n    - gap in vsi" in result.stdout.str()
    result = project.runpytest_inprocess(*args, "--strict-gates")
    result.assert_outcomes(passed=1 + 1 + 15 + 1, failed=1)


def test_a_served_run_loads_no_torch_nor_scikit_learn(server, pytester, tmp_path) -> None:
    """A run against a server pays only for its model: the suite process imports neither torch
    (no device to pick, no CPU threads to set) nor scikit-learn nor scipy.stats (the gap's
    probe, AUROC and Spearman load them where they are used), about 3.5 s of a run's start."""
    from benchc_tests.unit.suite_project import make_suite_project

    project = make_suite_project(pytester)
    loaded = tmp_path / "loaded.txt"
    pytester.makeconftest(
        'pytest_plugins = ["benchc.plugin"]\n'
        "import sys\n"
        "def pytest_unconfigure(config):\n"
        "    heavy = ('torch', 'transformers', 'sklearn', 'scipy.stats')\n"
        f"    open({str(loaded)!r}, 'w').write(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    args = _served_suite_args(server, tmp_path, "--snapshot-update")
    result = project.runpytest_subprocess(*args)
    result.assert_outcomes(passed=1 + 1 + 15 + 2)
    assert loaded.read_text() == ""


@settings(max_examples=50, deadline=None)
@given(text=st.text(), n=st.integers(0, 3))
def test_a_spliced_data_url_encodes_as_json_would(text: str, n: int) -> None:
    """The request body splices each :class:`Verbatim` in as it is: the bytes decode to the
    body json would have written, whatever the other strings hold (the placeholders' text
    included)."""
    urls = [image_data_url(np.full((4 + i, 5, 3), i, np.uint8)) for i in range(n)]
    body = {"t": text, "parts": [{"url": u, "u": f"\0{text}-{i}\0"} for i, u in enumerate(urls)]}
    plain = {"t": text, "parts": [{"url": u.decode(), "u": p["u"]} for u, p in
                                  zip(urls, body["parts"], strict=True)]}  # fmt: skip
    assert all(isinstance(u, Verbatim) for u in urls)
    assert json.loads(encode_body(body)) == plain
