"""The HTTP side of the black-box backend: one client per backend, fit for a fleet.

Why not plain ``urllib``: a new TCP connection per request and no pooling cost ~48 ms of client
CPU per 448 px query, which a GPU fleet answering hundreds per second would wait on. This keeps
a keep-alive connection open per request thread (``httpx``), retries network errors and retryable
statuses with jittered exponential backoff, honours ``Retry-After`` on 429 / 503, reads the API
key from the environment, and learns once per session which optional request fields the server
rejects (a 400 / 422 naming them, or, when the error names nothing, by dropping them one at a
time): those are left out of every later request and reported in :attr:`ChatClient.dropped`.
"""

from __future__ import annotations

import email.utils
import itertools
import json
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import httpx

log = logging.getLogger(__name__)

#: HTTP statuses worth retrying (rate limit, transient server errors).
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
#: Statuses with which servers reject a request's fields.
REJECT_STATUS = frozenset({400, 422})
#: Longest ``Retry-After`` honoured (seconds); longer waits are cut to this.
MAX_RETRY_AFTER_S = 120.0

#: Fields that go or stay together (dropping one drops the group).
_GROUPS = ({"logprobs", "top_logprobs"},)


class ProxyError(RuntimeError):
    """The API kept failing after all retries, or answered with a non-retryable error."""


class RateLimiter:
    """At most ``per_s`` request starts per second across all threads (``None``: unlimited)."""

    def __init__(self, per_s: float | None) -> None:
        self.interval = 1.0 / per_s if per_s else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            time.sleep(start - now)


def retry_after_s(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    if not value:
        return None
    value = value.strip()
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(MAX_RETRY_AFTER_S, max(0.0, when.timestamp() - time.time()))


class Verbatim:
    """ASCII text that needs no JSON escaping (a base64 ``data:`` URL benchc built itself), kept
    as its byte pieces: the request body splices them in as they are, the one copy they are
    ever made. At 448 px a photograph's URL is ~0.6 MB; as a ``str`` it was decoded,
    concatenated, escape-scanned and encoded again per request (0.6 ms of the client's 2.7),
    and as one ``bytes`` it was copied twice more."""

    __slots__ = ("parts",)

    def __init__(self, *parts: bytes) -> None:
        self.parts = parts

    def __bytes__(self) -> bytes:
        return b"".join(self.parts)

    def decode(self) -> str:
        """The text, as the JSON string holds it."""
        return bytes(self).decode("ascii")


def backoff_delay(
    attempt: int, base_s: float, retry_after: float | None, rng: random.Random
) -> float:
    """Seconds before retry ``attempt`` (0-based): "equal jitter" exponential backoff, i.e.
    ``base_s * 2**attempt`` halved plus a uniform draw up to the other half, and never less
    than the server's ``Retry-After``. Why jitter: the threads of one backend that failed
    together (a 503 burst) would otherwise all retry at the same instant and fail together
    again; the floor keeps the exponential growth a struggling server needs."""
    ceiling = base_s * 2**attempt
    floor = max(ceiling / 2, retry_after) if retry_after is not None else ceiling / 2
    return floor + rng.uniform(0.0, ceiling / 2)


def encode_body(body: dict) -> bytes:
    """``json.dumps(body)`` as UTF-8, with every :class:`Verbatim` spliced in as a JSON string
    (one copy of its bytes)."""
    spliced: list[Verbatim] = []
    nonce = os.urandom(8).hex()  # no text a user wrote can collide with the placeholders

    def swap(value: Any) -> Any:
        if isinstance(value, Verbatim):
            spliced.append(value)
            return f"\0{nonce}-{len(spliced) - 1}\0"
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    rest = json.dumps(swap(body))
    pieces: list[bytes] = []
    for i, raw in enumerate(spliced):
        head, _, rest = rest.partition(f"\\u0000{nonce}-{i}\\u0000")
        pieces += (head.encode(), *raw.parts)
    pieces.append(rest.encode())
    return b"".join(pieces)


def _group(field: str) -> set[str]:
    return next((g for g in _GROUPS if field in g), {field})


class ChatClient:
    """``POST {base_url}/chat/completions`` with pooling, retries and field learning.

    ``optional`` names the fields a request may lose when the server rejects them (in the order
    they are tried when an error names none); every other field is required. Thread-safe: one
    client serves all of a backend's worker threads.

    Several base URLs (replicas of one model: a vLLM / SGLang fleet) share the requests in turn,
    and a retry goes to the next replica, so one answering 503 or unreachable costs a backoff
    per request, not the request.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        optional: Iterable[str] = (),
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 4,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 120.0,
        rate_limit: float | None = None,
    ) -> None:
        bases = [base_url] if isinstance(base_url, str) else list(base_url)
        if not bases:
            raise ValueError("ChatClient needs at least one base URL")
        self.urls = [f"{b.rstrip('/')}/chat/completions" for b in bases]
        self.url = self.urls[0]
        self._turn = itertools.count()
        #: Per URL: requests answered 200, and requests retried after its status or error.
        self.answered: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self.optional = tuple(optional)
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.limiter = RateLimiter(rate_limit)
        #: Draws the retry jitter (:func:`backoff_delay`); seed it for a reproducible schedule.
        self.rng = random.Random()
        #: Optional fields the server rejected -> the server's words (first 200 characters).
        self.dropped: dict[str, str] = {}
        #: Requests answered 429 / 503 that carried a ``Retry-After`` (honoured).
        self.throttled = 0
        self._learn_lock = threading.Lock()
        self._blind_failed = False
        self._local = threading.local()  # each request thread's own client (:meth:`_client`)
        self._clients: list[httpx.Client] = []
        self._http_lock = threading.Lock()

    # -------------------------------------------------------------------------- connection
    def _client(self) -> httpx.Client:
        """This thread's client, made on its first request (so a backend can be built without a
        server, and a forked worker never shares a parent's sockets). Each request thread keeps
        its own keep-alive connection (one per replica), so no request scans or locks a pool
        shared by all: httpcore's pool does both per request, and at 128 connections it
        doubled the client's CPU per request (docs/measurements.md)."""
        local = self._local
        client = getattr(local, "http", None)
        if client is None or local.pid != os.getpid():
            headers = {"Content-Type": "application/json"}
            key = os.environ.get(self.api_key_env)
            if key:
                headers["Authorization"] = f"Bearer {key}"
            per_thread = len(self.urls)
            client = httpx.Client(
                headers=headers,
                timeout=httpx.Timeout(self.timeout_s, connect=min(30.0, self.timeout_s)),
                limits=httpx.Limits(
                    max_connections=per_thread, max_keepalive_connections=per_thread
                ),
            )
            local.http, local.pid = client, os.getpid()
            with self._http_lock:
                self._clients.append(client)
        return client

    def close(self) -> None:
        """Close every thread's connections; a later request opens new ones."""
        with self._http_lock:
            clients, self._clients = self._clients, []
            self._local = threading.local()
        for client in clients:
            client.close()

    # -------------------------------------------------------------------------- requests
    def strip(self, body: dict) -> dict:
        """``body`` without the fields this server is known to reject."""
        if not self.dropped or not (self.dropped.keys() & body.keys()):
            return body
        return {k: v for k, v in body.items() if k not in self.dropped}

    def post(self, body: dict, what: str) -> dict:
        """The decoded JSON answer to ``body``; ``what`` names the query in errors."""
        body = self.strip(body)
        attempt = 0
        first = next(self._turn)  # the replicas take requests in turn
        while True:
            status, payload, headers = self._send(body, what, attempt, first)
            url = self._url(first, attempt)
            if status == 200:
                self._count(self.answered, url)
                return payload
            text = json.dumps(payload)[:300] if isinstance(payload, dict) else str(payload)
            if status in REJECT_STATUS:
                learnt = self._learn(body, text, what)
                if learnt is not None:
                    if isinstance(learnt, dict):
                        return learnt
                    body = self.strip(body)
                    continue
            if status not in RETRY_STATUS:
                raise ProxyError(f"{url} answered {status} for {what}: {text}")
            if attempt >= self.max_retries:
                raise ProxyError(
                    f"{url} failed for {what} after {attempt + 1} attempts: HTTP {status}: {text}"
                )
            self._count(self.retried, url)
            wait = retry_after_s(headers.get("retry-after"))
            if wait is not None:
                self.throttled += 1
            self._sleep(attempt, wait)
            attempt += 1

    def _url(self, first: int, attempt: int) -> str:
        """The replica of a request's ``attempt``: its own turn's, then the next ones'."""
        return self.urls[(first + attempt) % len(self.urls)]

    def _count(self, counter: Counter[str], url: str) -> None:
        with self._count_lock:
            counter[url] += 1

    def _sleep(self, attempt: int, retry_after: float | None) -> None:
        time.sleep(backoff_delay(attempt, self.backoff_s, retry_after, self.rng))

    def _send(
        self, body: dict, what: str, attempt: int, first: int = 0
    ) -> tuple[int, Any, httpx.Headers]:
        """One request, retrying network errors (each retry on the next replica); (status,
        decoded body, headers)."""
        data = encode_body(body)
        while True:
            self.limiter.wait()
            url = self._url(first, attempt)
            try:
                resp = self._client().post(url, content=data)
                try:
                    payload = resp.json()
                except ValueError:
                    payload = resp.text[:300]
                    if resp.status_code == 200:  # a 200 that is not JSON: retry it
                        raise httpx.DecodingError(f"non-JSON answer: {payload!r}") from None
                return resp.status_code, payload, resp.headers
            except httpx.HTTPError as err:
                if attempt >= self.max_retries:
                    raise ProxyError(
                        f"{url} failed for {what} after {attempt + 1} attempts: "
                        f"{type(err).__name__}: {err}"
                    ) from err
                self._count(self.retried, url)
                log.warning("request for %s failed (%s); attempt %d", what, err, attempt + 1)
                self._sleep(attempt, None)
                attempt += 1

    # -------------------------------------------------------------------------- learning
    def _learn(self, body: dict, text: str, what: str) -> bool | dict | None:
        """After a 400 / 422: drop the optional fields the error names (``True``); when it
        names none, find them by sending ``body`` without each in turn (the answer that
        succeeded is returned); ``None`` when no optional field is to blame."""
        with self._learn_lock:
            if self.dropped.keys() & body.keys():
                return True  # another thread learnt meanwhile: strip and resend
            present = [f for f in self.optional if f in body]
            named = [f for f in present if re.search(rf"(?<![\w]){re.escape(f)}(?![\w])", text)]
            if named:
                self._drop(named, text)
                return True
            if not present or self._blind_failed:
                return None
            # nothing named: try without each field, then without all of them
            for trial in [[f] for f in present] + [present]:
                fields = set().union(*(_group(f) for f in trial))
                status, payload, _ = self._send(
                    {k: v for k, v in body.items() if k not in fields}, what, self.max_retries
                )
                if status == 200:
                    self._drop(sorted(fields), text)
                    return payload
            self._blind_failed = True
            return None

    def _drop(self, fields: Iterable[str], text: str) -> None:
        for f in fields:
            for member in _group(f):
                self.dropped.setdefault(member, text[:200])
        log.warning("%s rejects %s: left out from now on", self.url, ", ".join(sorted(fields)))
