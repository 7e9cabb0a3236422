"""The HTTP side of the black-box backend: one client per backend, fit for a fleet.

Why not plain ``urllib``: a new TCP connection per request and no pooling cost ~48 ms of client
CPU per 448 px query, which a GPU fleet answering hundreds per second would wait on. This keeps
a keep-alive connection open per request thread (``httpx``), retries network errors, retryable
statuses and answers that do not fit the run's route (:class:`ContentFault`) with jittered,
capped exponential backoff within a time budget (``retry_budget_s``: a server restart of about a
minute is ridden out), honours ``Retry-After`` on every retried status, counts each retry by
cause, prints a liveness line while requests wait (:class:`Heartbeat`), reads the API key from
the environment, and learns once per session which optional request fields the server rejects
(a 400 / 422 naming them, or, when the error names nothing, by dropping them one at a time):
those are left out of every later request and reported in :attr:`ChatClient.dropped`.

A fault that outlasts its retries is a :class:`ServerFault` (a
:class:`benchc.errors.InfrastructureError`): it names the server, the status or exception, the
query and the attempts, and the client keeps it: every later request raises it again without
being sent, so a run ends on it once instead of re-sending the failing request from every case.
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from benchc.errors import InfrastructureError

log = logging.getLogger(__name__)

#: Defaults of the retry, timeout and liveness settings (``--model-args`` keys of the openai
#: backend; docs/guides/servers.md). A dead server ends a request, and so the run, within
#: ``retry_budget_s + timeout_s`` (2.5 min); a restart of about a minute is ridden out.
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RETRY_BUDGET_S = 90.0
DEFAULT_BACKOFF_S = 0.5
DEFAULT_MAX_BACKOFF_S = 10.0
DEFAULT_CONTENT_RETRIES = 3
DEFAULT_HEARTBEAT_S = 60.0

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


class ServerFault(InfrastructureError, ProxyError):
    """A fault of the server that outlasted the retries (or cannot be retried): outside the
    model, so it ends the run with the infrastructure exit code, never a FAIL."""


class ContentFault(ValueError):
    """An answer that does not fit the run's route (no ``logprobs`` where they were asked for,
    no choices, a malformed body): retried like a transient fault, counted as ``cause``."""

    def __init__(self, cause: str, detail: str = "") -> None:
        super().__init__(f"{cause}: {detail}" if detail else cause)
        self.cause = cause


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
    attempt: int,
    base_s: float,
    retry_after: float | None,
    rng: random.Random,
    max_s: float | None = None,
) -> float:
    """Seconds before retry ``attempt`` (0-based): "equal jitter" exponential backoff, i.e.
    ``base_s * 2**attempt`` (at most ``max_s``) halved plus a uniform draw up to the other half,
    and never less than the server's ``Retry-After``. Why jitter: the threads of one backend
    that failed together (a 503 burst) would otherwise all retry at the same instant and fail
    together again; the floor keeps the exponential growth a struggling server needs; the cap
    keeps a server that comes back after a restart from waiting a doubled delay for nothing."""
    ceiling = base_s * 2 ** min(attempt, 60)
    if max_s is not None:
        ceiling = min(ceiling, max_s)
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

    Retries: a network error, a retryable status (:data:`RETRY_STATUS`) or a
    :class:`ContentFault` raised by ``post``'s ``check`` is retried after a jittered backoff
    (``backoff_s`` doubling up to ``max_backoff_s``, never less than ``Retry-After``) for as long
    as the request's first attempt is less than ``retry_budget_s`` old (and at most
    ``max_retries`` times when that is set; content faults at most ``content_retries`` times).
    ``timeout_s`` bounds each attempt. ``heartbeat_s``: while requests wait, a line every so
    often through ``notify`` (requests in flight, the oldest's age).
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        *,
        optional: Iterable[str] = (),
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 4,
        max_retries: int | None = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
        content_retries: int = DEFAULT_CONTENT_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        rate_limit: float | None = None,
        notify: Callable[[str], None] | None = None,
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
        #: Retries by cause (``HTTP 503``, ``HTTP 500 (Retry-After)``, ``timeout``, ``connection
        #: dropped``, ``content: no logprobs``, ...): the summary's and report.json's counts.
        self.retry_causes: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self.optional = tuple(optional)
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.retry_budget_s = retry_budget_s
        self.content_retries = content_retries
        self.timeout_s = timeout_s
        self.heartbeat_s = heartbeat_s
        self.limiter = RateLimiter(rate_limit)
        #: Where liveness lines go (the suite sets its terminal writer); default: the log.
        self.notify: Callable[[str], None] = notify or (lambda line: log.warning("%s", line))
        #: Draws the retry jitter (:func:`backoff_delay`); seed it for a reproducible schedule.
        self.rng = random.Random()
        #: Optional fields the server rejected -> the server's words (first 200 characters).
        self.dropped: dict[str, str] = {}
        #: Retries that waited for the server's ``Retry-After`` (any retried status).
        self.throttled = 0
        #: The permanent fault this client met: every later request raises it unsent.
        self.fault: ServerFault | None = None
        self._learn_lock = threading.Lock()
        self._blind_failed = False
        self._local = threading.local()  # each request thread's own client (:meth:`_client`)
        self._clients: list[httpx.Client] = []
        self._http_lock = threading.Lock()
        self._inflight: dict[int, float] = {}  # request token -> monotonic start
        self._tokens = itertools.count()
        self._beat: threading.Thread | None = None
        self._beat_stop = threading.Event()

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
        self._beat_stop.set()
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

    def post(self, body: dict, what: str, check: Callable[[Any], Any] | None = None) -> Any:
        """The decoded JSON answer to ``body`` (``check(answer)`` when given: it raises
        :class:`ContentFault` for an answer that does not fit, retried like a transient
        fault); ``what`` names the query in errors. :class:`ServerFault` when the fault
        outlasts the retries, and for every request after that one (unsent)."""
        if self.fault is not None:
            raise self.fault
        body = self.strip(body)
        retry = _Attempts(time.monotonic())
        first = next(self._turn)  # the replicas take requests in turn
        token = self._begin()
        try:
            while True:
                url = self._url(first, retry.attempt)
                status, payload, headers, failure = self._send(body, url)
                if failure is not None:
                    self._again(retry, url, what, failure[0], None, failure[1])
                    continue
                if status == 200:
                    if check is not None:
                        try:
                            payload = check(payload)
                        except ContentFault as fault:
                            self._again(retry, url, what, fault.cause, None, str(fault), True)
                            continue
                    self._count(self.answered, url)
                    return payload
                text = json.dumps(payload)[:300] if isinstance(payload, dict) else str(payload)
                if status in REJECT_STATUS:
                    learnt = self._learn(body, text, what, url)
                    if learnt is not None:
                        if isinstance(learnt, dict):
                            return learnt if check is None else check(learnt)
                        body = self.strip(body)
                        continue
                if status not in RETRY_STATUS:
                    raise self._fail(
                        url, f"HTTP {status}: {text}", what, retry.attempt + 1,
                        f"HTTP {status} is not retried (retried: "
                        f"{', '.join(map(str, sorted(RETRY_STATUS)))})",
                    )  # fmt: skip
                wait = retry_after_s(headers.get("retry-after"))
                cause = f"HTTP {status}" + (" (Retry-After)" if wait is not None else "")
                self._again(retry, url, what, cause, wait, f"HTTP {status}: {text}")
        finally:
            self._end(token)

    def _again(
        self,
        retry: _Attempts,
        url: str,
        what: str,
        cause: str,
        retry_after: float | None,
        detail: str,
        content: bool = False,
    ) -> None:
        """Wait and count one retry of ``cause``, or raise :class:`ServerFault` when the
        request's retries are spent (its time budget, ``max_retries``, ``content_retries``)."""
        if self.fault is not None:  # another request failed for good: the run ends on it
            raise self.fault
        delay = backoff_delay(
            retry.attempt, self.backoff_s, retry_after, self.rng, self.max_backoff_s
        )
        elapsed = time.monotonic() - retry.started
        spent = None
        if content and retry.content >= self.content_retries:
            spent = f"the same fault on every try (content_retries={self.content_retries})"
        elif self.max_retries is not None and retry.attempt >= self.max_retries:
            spent = f"retries spent (max_retries={self.max_retries})"
        elif elapsed + delay > self.retry_budget_s:
            spent = (
                f"still failing after {elapsed:.1f} s of retries "
                f"(retry_budget_s={self.retry_budget_s:g}, timeout_s={self.timeout_s:g})"
            )
        if spent is not None:
            raise self._fail(url, detail, what, retry.attempt + 1, spent)
        self._count(self.retried, url)
        with self._count_lock:
            self.retry_causes[cause] += 1
            self.throttled += retry_after is not None
        log.info("retrying %s (%s), attempt %d", what, detail[:120], retry.attempt + 1)
        time.sleep(delay)
        retry.attempt += 1
        retry.content += content

    def _fail(self, url: str, detail: str, what: str, attempts: int, why: str) -> ServerFault:
        """The permanent fault, kept: later requests raise it without being sent."""
        fault = ServerFault(url, detail, item=what, attempts=attempts, hint=why)
        with self._count_lock:
            if self.fault is None:
                self.fault = fault
        return fault

    def count_retry(self, cause: str) -> None:
        """Count a retry the caller made itself (a re-asked answer: :mod:`benchc.models.proxy`)."""
        with self._count_lock:
            self.retry_causes[cause] += 1

    def _url(self, first: int, attempt: int) -> str:
        """The replica of a request's ``attempt``: its own turn's, then the next ones'."""
        return self.urls[(first + attempt) % len(self.urls)]

    def _count(self, counter: Counter[str], url: str) -> None:
        with self._count_lock:
            counter[url] += 1

    def _send(self, body: dict, url: str) -> tuple[int, Any, httpx.Headers, tuple[str, str] | None]:
        """One request: (status, decoded body, headers, None), or, for a network error or a
        200 that is not JSON, (0, None, empty headers, (cause, detail))."""
        data = encode_body(body)
        self.limiter.wait()
        try:
            resp = self._client().post(url, content=data)
        except httpx.HTTPError as err:
            return 0, None, httpx.Headers(), (_network_cause(err), f"{type(err).__name__}: {err}")
        try:
            payload = resp.json()
        except ValueError:
            payload = resp.text[:300]
            if resp.status_code == 200:  # a 200 that is not JSON: retried
                return 0, None, resp.headers, ("malformed answer", f"non-JSON answer: {payload!r}")
        return resp.status_code, payload, resp.headers, None

    # -------------------------------------------------------------------------- liveness
    def _begin(self) -> int:
        token = next(self._tokens)
        with self._count_lock:
            self._inflight[token] = time.monotonic()
            if self._beat is None and self.heartbeat_s > 0:
                self._beat_stop.clear()
                self._beat = threading.Thread(
                    target=self._heartbeat, name="benchc-heartbeat", daemon=True
                )
                self._beat.start()
        return token

    def _end(self, token: int) -> None:
        with self._count_lock:
            self._inflight.pop(token, None)

    def waiting(self) -> tuple[int, float]:
        """Requests in flight and the oldest one's age in seconds (0 when none)."""
        with self._count_lock:
            starts = list(self._inflight.values())
        return len(starts), (time.monotonic() - min(starts)) if starts else 0.0

    def _heartbeat(self) -> None:
        """Every ``heartbeat_s`` while requests are in flight: one line when the oldest has
        waited at least half of it. Ends when none is in flight (the next request restarts it)."""
        while not self._beat_stop.wait(self.heartbeat_s):
            with self._count_lock:
                if not self._inflight:
                    self._beat = None
                    return
            n, age = self.waiting()
            if age < self.heartbeat_s / 2:
                continue
            with self._count_lock:
                causes = ", ".join(f"{k} {v}" for k, v in sorted(self.retry_causes.items()))
                answered = sum(self.answered.values())
            try:
                self.notify(
                    f"benchc: waiting on {self.url.removesuffix('/chat/completions')}: {n} "
                    f"request(s) in flight, the oldest for {age:.0f} s; {answered} answered; "
                    f"retries: {causes or 'none'} (a request gives up after "
                    f"retry_budget_s={self.retry_budget_s:g} s of retries)\n"
                )
            except Exception:  # a closed terminal must not kill the requests
                log.debug("heartbeat line not written", exc_info=True)
        with self._count_lock:
            self._beat = None

    # -------------------------------------------------------------------------- learning
    def _learn(self, body: dict, text: str, what: str, url: str) -> bool | dict | None:
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
                status, payload, _, _ = self._send(
                    {k: v for k, v in body.items() if k not in fields}, url
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


@dataclass
class _Attempts:
    """One request's retry state: when its first attempt started, attempts and content
    faults so far."""

    started: float
    attempt: int = 0
    content: int = 0


def _network_cause(err: httpx.HTTPError) -> str:
    """A network error's cause as the summary counts it."""
    if isinstance(err, httpx.TimeoutException):
        return "connect timeout" if isinstance(err, httpx.ConnectTimeout) else "timeout"
    if isinstance(err, httpx.ConnectError):
        return "connection refused"
    if isinstance(err, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return "connection dropped"
    return type(err).__name__
