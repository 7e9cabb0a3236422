"""Every capability a server may lack, over real HTTP: the reference server with one
:class:`~benchc.testing.serve.Quirks` switched on at a time, the embedded tiny VLM behind it.

`transformers serve` (``-m servers``) shows the same gaps on a server benchc did not write;
these tests cover each gap one by one, including those that server does not have.
"""

from __future__ import annotations

import base64
import time

import numpy as np
import pytest

from benchc.models.base import Query
from benchc.models.client import ChatClient, retry_after_s
from benchc.models.prompt import chat_messages
from benchc.models.proxy import (
    PATH_LOGPROBS,
    PATH_NO_LOGPROBS,
    PATH_OUTSIDE_TOPK,
    SPIKE_MIN_QUERIES,
    OpenAIProxyBackend,
    png_bytes,
)
from benchc.spec import format_question
from benchc.testing.serve import ChatServer, Quirks, template_messages
from benchc_tests.unit.http_stub import running
from benchc_tests.unit.suite_project import make_suite_project
from benchc_tests.unit.test_models_hf import synthetic_queries, tiny_backend_cached

pytest_plugins = ["pytester"]


def serving(quirks: Quirks | None = None):
    """The reference server with ``quirks``, running for a ``with`` block."""
    return running(ChatServer(tiny_backend_cached(), seed=0, quirks=quirks or Quirks()))


def _proxy(srv: ChatServer, **kw) -> OpenAIProxyBackend:
    kw.setdefault("concurrency", 1)
    kw.setdefault("backoff_s", 0.01)
    return OpenAIProxyBackend("tiny", srv.base_url, **kw)


def _image_part(body: dict) -> bytes:
    url = body["messages"][0]["content"][0]["image_url"]["url"]
    return base64.b64decode(url.partition(",")[2])


# -- one prompt ---------------------------------------------------------------------------------
def test_requests_carry_the_white_box_prompt_image_first() -> None:
    """The served request is the white-box chat turn: image part, then the same text, thinking
    off; the reference server renders it in part order, so text-first renders differently."""
    tiny = tiny_backend_cached()
    q = synthetic_queries(1, seed=21)[0]
    with serving() as srv:
        _proxy(srv).forward([q])
    body = srv.bodies[0]
    parts = body["messages"][0]["content"]
    assert [p["type"] for p in parts] == ["image_url", "text"]
    assert parts[1]["text"] == tiny.user_text(q) == format_question(q.question, q.options)
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
    messages, image = template_messages(body)
    np.testing.assert_array_equal(image, q.image)
    assert tiny.render_messages(messages) == tiny.render(tiny.user_text(q))
    text_first = [{"role": "user", "content": messages[0]["content"][::-1]}]
    assert tiny.render_messages(text_first) != tiny.render(tiny.user_text(q))
    assert chat_messages("x")[0]["content"][0] == {"type": "image"}


def test_cache_png_bytes_are_sent_as_stored() -> None:
    q = synthetic_queries(1, seed=22)[0]
    stored = png_bytes(q.image) + b""  # what a cache file holds (any valid PNG of the pixels)
    with serving() as srv:
        proxy = _proxy(srv)
        a = proxy.forward([Query(q.image, q.question, q.options, id="a", encoded=stored)])
        b = proxy.forward([Query(q.image, q.question, q.options, id="b")])
    assert _image_part(srv.bodies[0]) == stored
    np.testing.assert_array_equal(a.option_logits, b.option_logits)  # same pixels, same answer


# -- log-probs ----------------------------------------------------------------------------------
def test_no_logprobs_is_learnt_once_then_every_query_samples() -> None:
    queries = synthetic_queries(6, seed=23)
    with serving(Quirks(logprobs=False)) as srv:
        proxy = _proxy(srv, n_samples=4, concurrency=3)
        out = proxy.forward(queries)
        assert proxy.capabilities.top_k == 0
        assert proxy.capabilities.option_distribution == "sampling"
        with pytest.raises(NotImplementedError, match="returned no top_logprobs"):
            proxy.forward(queries[:2], top_k=5)
    asked = [b for b in srv.bodies if b.get("logprobs")]
    assert len(asked) == 2  # probed once per session (re-asked once: the same answer is the
    # server's, not a glitch), not per query
    assert proxy.path_counts == {PATH_NO_LOGPROBS: 8}
    assert np.all(out.letter_counts.sum(1) + out.n_unparsed == 4)


def test_letters_outside_the_served_top_k_fall_back_to_sampling() -> None:
    queries = synthetic_queries(4, seed=24)
    with serving() as srv:
        proxy = _proxy(srv, top_logprobs=2, n_samples=3)
        out = proxy.forward(queries)
    assert proxy.path_counts == {PATH_OUTSIDE_TOPK: 4}  # 4 options never fit in a top 2
    assert out.letter_counts is not None and np.all(out.letter_counts.sum(1) <= 3)


# -- n ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("max_n", [1, 3])
def test_capped_or_ignored_n_is_topped_up(max_n: int) -> None:
    q = synthetic_queries(2, seed=25)
    with serving(Quirks(max_n=max_n)) as srv:
        proxy = _proxy(srv, logprobs=False, n_samples=7)
        out = proxy.forward(q)
    assert np.all(out.letter_counts.sum(1) + out.n_unparsed == 7)
    per_query = -(-7 // max_n)
    # the first query learns the cap (one request of n=7, then asks <= max_n)
    assert len(srv.bodies) <= 2 * per_query + 1
    assert all(b["n"] <= max_n for b in srv.bodies[2:])
    seeds = [b["seed"] for b in srv.bodies]
    assert len(set(seeds)) == len(seeds)  # every top-up request draws fresh samples
    assert any(f"at most {max_n} choice(s) per request" in n for n in proxy.notes())


# -- rejected fields ----------------------------------------------------------------------------
def test_fields_rejected_by_name_are_dropped_once_and_noted() -> None:
    queries = synthetic_queries(5, seed=26)
    with serving(Quirks(reject=frozenset({"top_k", "seed"}))) as srv:
        proxy = _proxy(srv, logprobs=False, n_samples=2, concurrency=2)
        out = proxy.forward(queries)
    assert np.all(out.letter_counts.sum(1) + out.n_unparsed == 2)
    assert set(proxy.client.dropped) == {"top_k", "seed"}
    late = srv.bodies[3:]
    assert late and all("top_k" not in b and "seed" not in b for b in late)
    assert all("top_p" in b and "temperature" in b for b in late)
    assert any("rejects seed, top_k" in n for n in proxy.notes())


def test_an_error_naming_nothing_is_narrowed_down_by_dropping_fields() -> None:
    queries = synthetic_queries(3, seed=27)
    quirks = Quirks(reject=frozenset({"logprobs"}), opaque_errors=True)
    with serving(quirks) as srv:
        proxy = _proxy(srv, n_samples=3)
        proxy.forward(queries)
    assert set(proxy.client.dropped) == {"logprobs", "top_logprobs"}
    assert proxy.path_counts == {PATH_NO_LOGPROBS: 3}


def test_a_content_error_is_not_blamed_on_optional_fields() -> None:
    with serving() as srv:
        client = ChatClient(srv.base_url, optional=("seed", "n"), backoff_s=0.01)
        bad = {"model": "m", "messages": [{"role": "user", "content": "no image"}], "seed": 1}
        with pytest.raises(Exception, match="HTTP 400"):
            client.post(bad, "query")
    assert client.dropped == {}


# -- throttling ---------------------------------------------------------------------------------
def test_429_with_retry_after_is_waited_for() -> None:
    q = synthetic_queries(1, seed=28)
    with serving(Quirks(throttle=2, retry_after="0.3")) as srv:
        proxy = _proxy(srv, max_retries=3)
        start = time.monotonic()
        out = proxy.forward(q)
        waited = time.monotonic() - start
    assert waited >= 0.6 and proxy.path_counts[PATH_LOGPROBS] == 1
    assert np.isfinite(out.option_logits).all()
    assert any("retries by cause: 2 HTTP 429 (Retry-After)" in n for n in proxy.notes())
    assert retry_after_s("7") == 7.0 and retry_after_s("junk") is None
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date in the past


# -- a server that does not sample --------------------------------------------------------------
def test_a_server_that_ignores_temperature_is_reported_with_the_fix() -> None:
    queries = synthetic_queries(SPIKE_MIN_QUERIES, seed=29)
    with serving(Quirks(greedy_only=True)) as srv:
        proxy = _proxy(srv, logprobs=False, n_samples=6, concurrency=2)
        proxy.forward(queries)
    body = srv.bodies[-1]
    assert body["temperature"] == 1.0 and body["top_p"] == 1.0 and body["top_k"] == -1
    assert proxy.not_sampling()
    warning = proxy.notes()[-1]
    assert warning.startswith("WARNING") and "does not sample" in warning
    assert "--model-args='extra_body=" in warning and "do_sample" in warning


def test_a_sampling_server_is_not_reported() -> None:
    queries = synthetic_queries(SPIKE_MIN_QUERIES, seed=29)
    with serving() as srv:
        proxy = _proxy(srv, logprobs=False, n_samples=6, concurrency=2)
        proxy.forward(queries)
    assert not proxy.not_sampling()
    assert not any(n.startswith("WARNING") for n in proxy.notes())


def test_extra_body_reaches_every_request_and_the_fingerprint() -> None:
    q = synthetic_queries(1, seed=30)
    with serving() as srv:
        proxy = _proxy(srv, extra_body={"generation_config": '{"do_sample": true}'})
        proxy.forward(q)
    assert all(b["generation_config"] == '{"do_sample": true}' for b in srv.bodies)
    assert proxy.fingerprint != _proxy(srv).fingerprint


# -- the suite, the report and compare on what a server can give --------------------------------


def _suite_args(srv: ChatServer, tmp_path, name: str, data) -> list[str]:
    return [
        "suite",
        f"--model=openai:tiny@{srv.base_url}",
        "--model-args=concurrency=2,n_samples=4",
        f"--dataset={data}",
        "--corruptions=pixelate",
        "--severities=2",
        f"--results-dir={tmp_path / f'results-{name}'}",
        f"--cache-dir={tmp_path / 'cache'}",
        f"--thresholds-dir={tmp_path / f'thresholds-{name}'}",
        f"--report={tmp_path / f'report-{name}'}",
        "-p",
        "no:randomly",
    ]


@pytest.mark.slow  # four suite runs against a live server, then report and compare (~11 s)
def test_suite_report_and_compare_read_every_run_a_server_gives(pytester, tmp_path) -> None:
    """A server without log-probs: the grid by sampling, VSI UNCHECKED (no traceback), the
    report says what is missing; a log-prob server: top-k VSI with no tower. ``benchc report``
    and ``benchc compare`` read both."""
    import json

    from benchc.cli import main
    from benchc.data import save_jsonl
    from benchc.data.synthetic import generate

    data = tmp_path / "five"
    save_jsonl(generate(5, 12), data)
    project = make_suite_project(pytester)
    runs = {}
    for name, quirks in (("sampling", Quirks(logprobs=False)), ("topk", Quirks())):
        with serving(quirks) as srv:
            args = _suite_args(srv, tmp_path, name, data)
            result = project.runpytest_inprocess(*args, "--snapshot-update")
            vsi_passed = 2 if name == "topk" else 0
            result.assert_outcomes(passed=17 + vsi_passed, skipped=2 - vsi_passed)
            out = result.stdout.str()
            assert "Traceback" not in out
            if name == "sampling":
                # one summary line per reason, counting its gates
                assert "- 2 gates (gap: 1 vsi; insensitive_fraction: 1 vsi): VSI" in out
                # 5 samples x (clean + 1 cell), and their 3 other option orders on both
                assert "queries scored 40 by sampling (server returned no logprobs)" in out
        doc = json.loads((tmp_path / f"report-{name}" / "report.json").read_text())
        runs[name] = doc["series"][0]
        stored = sorted((tmp_path / f"results-{name}" / "tiny").iterdir())
        assert len(stored) == 1
        # the route the run took, recorded once it had scored (its fingerprint says log-probs)
        manifest = json.loads((stored[0] / "manifest.json").read_text())
        assert manifest["option_access"] == ("sampling" if name == "sampling" else "logprobs")
        assert main(["report", str(stored[0]), "--baseline", str(tmp_path / f"thresholds-{name}"),
                     "--out", str(tmp_path / f"offline-{name}")]) == 0  # fmt: skip
    assert runs["sampling"]["vsi"] is None
    assert any(m.startswith("VSI (no VSI arrays") for m in runs["sampling"]["missing"])
    assert runs["topk"]["vsi"]["variant"] == "vsi_top20 (estimated)"
    assert list(runs["topk"]["vsi"]["variants"]) == ["top20"]  # its only support, named by k
    assert runs["topk"]["vsi"]["gap"]["gap"] is None
    assert any("vision tower" in m for m in runs["topk"]["missing"])
    both = [str(next((tmp_path / f"results-{n}" / "tiny").iterdir())) for n in runs]
    assert main(["compare", *both, "--out", str(tmp_path / "compare")]) == 0
    page = (tmp_path / "compare" / "report.html").read_text()
    assert page.count('class="note missing"') == 2


def test_a_prepared_image_is_encoded_once_losslessly_and_a_writeable_one_every_time() -> None:
    from benchc.corruptions.cache import decode_rgb

    rng = np.random.default_rng(0)
    shared = rng.integers(0, 256, (40, 56, 3), dtype=np.uint8)
    shared.flags.writeable = False  # as the suite's prepared images (every condition's)
    first = png_bytes(shared)
    assert png_bytes(shared) is first  # encoded once
    np.testing.assert_array_equal(decode_rgb(first), shared)  # the server sees these pixels
    mutable = shared.copy()
    before = png_bytes(mutable)
    mutable[0, 0] ^= 255
    np.testing.assert_array_equal(decode_rgb(png_bytes(mutable)), mutable)
    assert png_bytes(mutable) != before
    base = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
    view = base[:]
    view.flags.writeable = False  # read-only, but its writeable base can still change it
    png_bytes(view)
    base[0, 0] ^= 255
    np.testing.assert_array_equal(decode_rgb(png_bytes(view)), base)
