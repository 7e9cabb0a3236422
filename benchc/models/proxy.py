"""The black-box backend over an OpenAI-compatible chat API (vLLM, SGLang, TGI,
``transformers serve``, OpenAI).

Every request carries exactly the white-box prompt (:mod:`benchc.models.prompt`: one user
turn, image part first, thinking off through ``chat_template_kwargs``). Per query, one request
asks for the first answer token's ``top_logprobs`` (``max_tokens`` 1, ``top_logprobs`` 20).
When the server returns them and every option letter is among them, the option logit of
letter L is the logsumexp of the log-probs of L's single-token variants (``L``, `` L``, ``▁L``,
``ĠL``), exactly as docs/spec.md §2 reads white-box logits: one request instead of twenty. Otherwise
(no log-probs from this server, or a letter outside the top-k) the query falls back to the
docs/spec.md §3 sampling proxy: N samples at temperature 1.0, replies mapped to letters by
:mod:`benchc.models.parse`, p_k = (count_k + a) / (N_valid + a K) with Jeffreys a = 0.5,
``option_logits`` = log p and ``option_mass`` = the share of replies that named an option.
Rows with no parsable reply are invalid (NaN), never a silent uniform guess. How many queries
took which path is counted in :attr:`OpenAIProxyBackend.path_counts`.

VSI needs the full next-token distribution, which a server does not give; ``forward(top_k=k)``
(k <= ``top_logprobs``) returns the served top-k instead, for VSI's documented top-k variant.

The route (log-probs or sampling) is decided once, before the first query is scored
(:meth:`OpenAIProxyBackend.settle_route`): from ``logprobs=false``, else from a probe of the
server (the first query's log-prob request, re-asked up to ``content_retries`` times when the
answer has none: a server that never gives them, as ``transformers serve``, samples). A run
never changes route on its own: on the log-prob route an answer without ``logprobs`` is a
content fault, retried like a transient one, and a server that keeps answering without them
ends the run (:class:`~benchc.models.client.ServerFault`). A top-k without every option letter
is re-asked (up to ``content_retries`` times): the same answer twice in a row is the server's
answer, and that query takes the §3 sampling proxy (counted, the same rule on both sides); an
answer with every letter is used.

Servers differ in what they give. Fields a server rejects (``logprobs``, ``top_logprobs``,
``n``, ``seed``, ``top_k``, ...) are dropped once and noted (:mod:`benchc.models.client`); a
capped or ignored ``n`` is topped up with further requests; the sampling request states the
parameters it relies on (``temperature``, ``top_p`` 1, no top-k cut) and replies that never
vary across seeds are reported with the ``--model-args`` that make the server sample.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import math
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pybase64
from PIL import Image

from benchc.models.base import Backend, BatchOutput, Capabilities, Query
from benchc.models.client import (
    DEFAULT_BACKOFF_S,
    DEFAULT_CONTENT_RETRIES,
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MAX_BACKOFF_S,
    DEFAULT_RETRY_BUDGET_S,
    DEFAULT_TIMEOUT_S,
    ChatClient,
    ContentFault,
    ProxyError,
    RateLimiter,
    ServerFault,
    Verbatim,
)
from benchc.models.parse import PARSER_VERSION, parse_letter
from benchc.models.prompt import CHAT_VERSION, NO_THINKING, chat_messages, image_url_part
from benchc.models.source import slug
from benchc.spec import (
    JEFFREYS_ALPHA,
    LETTERS,
    PROMPT_VERSION,
    PROXY_SAMPLES,
    PROXY_TEMPERATURE,
)
from benchc.spec import format_question as _format_question

log = logging.getLogger(__name__)


def jeffreys(counts: np.ndarray, alpha: float = JEFFREYS_ALPHA) -> np.ndarray:
    """(count_k + a) / (N_valid + a K) along the last axis; NaN where N_valid = 0 (invalid)."""
    counts = np.asarray(counts, dtype=np.float64)
    n_valid = counts.sum(-1, keepdims=True)
    k = counts.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (counts + alpha) / (n_valid + alpha * k)
    return np.where(n_valid > 0, p, np.nan)


def image_data_url(image: np.ndarray | None, encoded: bytes | None = None) -> Verbatim:
    """A lossless PNG ``data:`` URL of an RGB uint8 array (OpenAI ``image_url`` content), as the
    ASCII bytes the request body splices in (:class:`~benchc.models.client.Verbatim`).

    ``encoded``: the PNG bytes of exactly ``image`` (a corruption-cache file), sent as they are
    instead of encoding the pixels again."""
    if encoded is None:
        encoded = png_bytes(image)
    return Verbatim(b"data:image/png;base64,", pybase64.b64encode(encoded))


#: PNG files of read-only arrays (the suite's prepared images, shared by every condition and
#: the VSI passes), by ``id``; an entry leaves with its array.
_ENCODED: dict[int, bytes] = {}
_encoded_lock = threading.Lock()


def png_bytes(image: np.ndarray) -> bytes:
    """Lossless PNG of an RGB uint8 array (the server decodes exactly these pixels), written
    as the corruption cache writes its entries (OpenCV, "Up" filter, fast compression: 9 ms at
    448 px against Pillow's 15). A read-only array is encoded once per process: a prepared
    image is sent by the clean condition and the VSI's clean pass."""
    from benchc.data.png import encode_png

    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
        buf = io.BytesIO()
        Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(
            buf, format="PNG", compress_level=1
        )
        return buf.getvalue()
    if image.flags.writeable or not _owns_memory(image):
        return encode_png(image, {})
    key = id(image)
    with _encoded_lock:
        hit = _ENCODED.get(key)
    if hit is None:
        hit = encode_png(image, {})
        with _encoded_lock:
            if key not in _ENCODED:
                _ENCODED[key] = hit
                weakref.finalize(image, _ENCODED.pop, key, None)
    return hit


def _owns_memory(image: np.ndarray) -> bool:
    """Whether no writeable array can change ``image``'s pixels under it (it owns its memory,
    or every array it views is read-only too)."""
    base = image
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return True


#: Query paths counted in :attr:`OpenAIProxyBackend.path_counts`.
PATH_LOGPROBS = "logprobs"
PATH_NO_LOGPROBS = "sampling (server returned no logprobs)"
PATH_OUTSIDE_TOPK = "sampling (a letter outside the top-k)"
PATH_SAMPLING = "sampling (logprobs off)"

#: The routes a run's option distributions take (``Capabilities.option_distribution``).
ROUTE_LOGPROBS = "logprobs"
ROUTE_SAMPLING = "sampling"
#: Retry causes of answers that do not fit the log-prob route.
NO_LOGPROBS = "content: no logprobs"
NO_LETTER = "content: no option letter in the top-k"
NO_CHOICES = "content: no choices"

#: Spellings of a single-token letter variant as servers return token text (docs/spec.md §2).
_VARIANT_PREFIXES = ("", " ", "\u2581", "\u0120")


def token_letter(token: str) -> str | None:
    """The option letter a served token spells (``A``, `` A``, ``▁A``, ``ĠA``), else None."""
    for prefix in _VARIANT_PREFIXES:
        rest = token[len(prefix) :] if token.startswith(prefix) else None
        if rest is not None and len(rest) == 1 and rest in LETTERS:
            return rest
    return None


def letter_logprobs(top: Sequence[tuple[str, float]], k: int) -> np.ndarray:
    """float64 (k,) logsumexp of each letter's variants among ``top`` (token, logprob) pairs;
    -inf for a letter with no variant there."""
    out = np.full(k, -np.inf)
    for token, logprob in top:
        letter = token_letter(token)
        if letter is None:
            continue
        j = LETTERS.index(letter)
        if j < k:
            out[j] = np.logaddexp(out[j], logprob)
    return out


def token_id(token: str) -> int:
    """A stable int64 id for a served token's text (servers name tokens by text, not id)."""
    digest = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


#: Optional request fields, in the order they are dropped when a server rejects a request
#: without naming the field: least needed first.
OPTIONAL_FIELDS = (
    "chat_template_kwargs",
    "top_k",
    "top_p",
    "seed",
    "n",
    "top_logprobs",
    "logprobs",
)
#: vLLM's and SGLang's "no top-k cut" (OpenAI has no ``top_k`` and rejects it: then dropped).
NO_TOP_K = -1
#: Sampled queries, all with identical replies, after which the server is reported as not
#: sampling. A model that is 99 % sure of every answer repeats all 20 of a query's replies
#: with chance 0.99^20 = 0.82, and all of 20 queries' with chance 0.02: so few false alarms.
SPIKE_MIN_QUERIES = 20

#: What makes a server that ignores ``temperature`` sample, for the warning.
SAMPLING_FIXES = (
    'transformers serve: --model-args=\'extra_body={"generation_config": '
    '"{\\"do_sample\\": true, \\"top_k\\": 0, \\"top_p\\": 1.0}"}\' '
    '(or serve a copy whose generation_config.json sets "do_sample": true); '
    "vLLM: start it with --generation-config vllm (the checkpoint's generation defaults "
    "otherwise override the request); a server that rejects top_k/top_p: check its "
    "sampling defaults"
)


#: How request seeds derive from a query (part of the fingerprint): ``px-crc``, from its pixels'
#: CRC-32 (before: their sha256, which needed the pixels of every cache file decoded).
SEED_VERSION = ":px-crc"


@dataclass
class _InFlight:
    """A batch whose requests :meth:`OpenAIProxyBackend.prepare` sent: a future per query."""

    queries: list[Query]
    futures: list[Future]

    def cancel(self) -> None:
        """Withdraw the requests not started yet (the started ones finish and are dropped)."""
        for future in self.futures:
            future.cancel()


class OpenAIProxyBackend(Backend):
    """A model served behind ``POST {base_url}/chat/completions``: top-k log-probs first, the
    sampling proxy where they do not give every letter (see the module docstring).

    The API key is read from the environment variable ``api_key_env`` (no header when unset,
    e.g. for local servers). ``concurrency`` threads run queries in parallel, each over its own
    keep-alive connection, a batch's requests sent when it is prepared (:meth:`prepare`: the
    next batch's queue behind the one being collected); ``rate_limit`` caps request starts per
    second across them; a request is retried on network errors, retryable statuses and
    answers that do not fit the route, for ``retry_budget_s`` (``timeout_s`` an attempt,
    ``backoff_s`` doubling to ``max_backoff_s``, ``content_retries``, optional
    ``max_retries``; :class:`~benchc.models.client.ChatClient`), and a fault that outlasts
    them ends the run (:class:`~benchc.models.client.ServerFault`).
    Request seeds derive from ``seed`` and the query, so a deterministic server gives
    identical results on rerun. ``logprobs=False`` asks for samples only; ``extra_body`` is
    merged into every request (server-specific switches, e.g. ``transformers serve``'s
    ``generation_config``).
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        logprobs: bool = True,
        top_logprobs: int = 20,
        n_samples: int = PROXY_SAMPLES,
        temperature: float = PROXY_TEMPERATURE,
        concurrency: int = 4,
        max_retries: int | None = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = DEFAULT_MAX_BACKOFF_S,
        retry_budget_s: float = DEFAULT_RETRY_BUDGET_S,
        content_retries: int = DEFAULT_CONTENT_RETRIES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        heartbeat_s: float = DEFAULT_HEARTBEAT_S,
        rate_limit: float | None = None,
        max_tokens: int = 16,
        extra_body: dict | None = None,
        seed: int = 0,
        batch_size: int | None = None,
    ) -> None:
        if n_samples < 1:
            raise ValueError(f"n_samples must be >= 1, got {n_samples}")
        if temperature <= 0:
            raise ValueError(f"the sampling proxy needs temperature > 0, got {temperature}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {concurrency}")
        if not 1 <= top_logprobs <= 20:
            raise ValueError(
                f"top_logprobs must be in 1..20 (the OpenAI limit), got {top_logprobs}"
            )
        if rate_limit is not None and rate_limit <= 0:
            raise ValueError(f"rate_limit must be > 0 requests per second, got {rate_limit}")
        #: Replicas of the model (``url1,url2``): the client spreads requests over them.
        self.base_urls = [u.strip().rstrip("/") for u in base_url.split(",")]
        for url in self.base_urls:
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"base_url must start with http:// or https://, got {url!r}")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise ValueError(f"extra_body must be a JSON object, got {extra_body!r}")
        self.model = model
        self.base_url = ",".join(self.base_urls)
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.n_samples = n_samples
        self.temperature = temperature
        self.concurrency = concurrency
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self.seed = seed
        # enough queries per forward to keep every connection busy
        self.batch_size = batch_size or max(16, 4 * concurrency)
        http = dict(api_key_env=api_key_env, concurrency=concurrency, max_retries=max_retries)
        http.update(backoff_s=backoff_s, timeout_s=timeout_s, rate_limit=rate_limit)
        http.update(max_backoff_s=max_backoff_s, retry_budget_s=retry_budget_s)
        http.update(content_retries=content_retries, heartbeat_s=heartbeat_s)
        self.client = ChatClient(self.base_urls, optional=OPTIONAL_FIELDS, **http)
        #: Queries scored per path (``PATH_*``), in this process.
        self.path_counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        #: ``logprobs`` or ``sampling``: decided once (:meth:`settle_route`), never changed.
        self.route: str | None = None if logprobs else ROUTE_SAMPLING
        self._route_lock = threading.Lock()
        self._probed: tuple[tuple, list] | None = None  # the probe's query and its top-k
        self._n_cap: int | None = None  # most choices the server returned for a larger n
        self._sampled = 0  # queries scored by sampling with N >= 2 replies
        self._spikes = 0  # ... of which every reply was the same text
        self._pool: ThreadPoolExecutor | None = None
        self.name = slug(model)
        #: What the server reported of itself in its first answer (model id, fingerprint).
        self.served: dict[str, str] | None = None
        mode = f":lp{top_logprobs}" if logprobs else ""
        extra = f":tok{max_tokens}" if max_tokens != 16 else ""
        if self.extra_body:
            digest = hashlib.sha256(json.dumps(self.extra_body, sort_keys=True).encode())
            extra += f":extra-{digest.hexdigest()[:12]}"
        self.fingerprint = (
            f"openai:{model}@{self.base_url}:n{n_samples}:t{temperature}:{PROMPT_VERSION}:"
            f"{CHAT_VERSION}:{PARSER_VERSION}:seed{seed}{SEED_VERSION}{mode}{extra}"
        )

    reads_files = True  # it sends each query's PNG file; the pixels only seed (their CRC)
    computes_locally = False

    @property
    def capabilities(self) -> Capabilities:  # type: ignore[override]
        """As configured, narrowed by the route the probe decided (:meth:`settle_route`)."""
        served = self.logprobs and self.route != ROUTE_SAMPLING
        return Capabilities(
            white_box=False,
            option_distribution="logprobs" if served else "sampling",
            full_distribution=False,
            top_k=self.top_logprobs if served else 0,
            vision_tower=False,
        )

    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        self._check_forward(queries, distribution, top_k)
        self.settle_route(queries[0])
        return self._output(queries, self._map(self._score, queries), top_k)

    def settle_route(self, query: Query) -> str:
        """The run's route, decided once before any query is scored: ``sampling`` under
        ``logprobs=false``; else ``logprobs`` when ``query``'s log-prob request is answered
        with log-probs within ``content_retries`` re-asks, ``sampling`` when it never is (a
        server that serves none). Never changed afterwards."""
        with self._route_lock:
            if self.route is None:
                self.route = ROUTE_LOGPROBS if self._probe(query) else ROUTE_SAMPLING
            return self.route

    def _probe(self, query: Query) -> bool:
        """Whether the server gives log-probs: ``query``'s log-prob request, re-asked while
        the answer has none (a glitch) and differs from the one before (the same answer twice
        is the server's); the answer is kept for scoring ``query``."""
        before = None
        for attempt in range(self.client.content_retries + 1):
            answer = self._post(self._top_body(query), query)
            pairs = _top_pairs(answer)
            if pairs is not None:
                self._probed = (self._probe_key(query), pairs)
                return True
            choices = answer.get("choices") if isinstance(answer, dict) else answer
            if attempt == self.client.content_retries or choices == before:
                return False
            before = choices
            self.client.count_retry(NO_LOGPROBS)
        return False

    def _probe_key(self, query: Query) -> tuple:
        return (self._seed(query, -1), query.id)

    def prepare(self, queries: Sequence[Query]) -> Any:
        """Send the batch's requests now: they queue on the ``concurrency`` connections behind
        every batch sent before, so the connections stay busy across batch, chunk and condition
        boundaries while the caller collects earlier batches (a fleet answering after L seconds
        gives up to ``concurrency / L`` requests/s, not a stall at every boundary). Before the
        session's first answer settles what the server gives, and at ``concurrency=1``, the
        batch is sent by :meth:`forward_prepared`, as :meth:`forward` sends it. The rows, and
        so every number, are the same either way: each request depends on its query alone."""
        unsettled = self.route is None
        if not queries or self.concurrency == 1 or unsettled:
            return list(queries)
        pool = self._http_pool()
        return _InFlight(list(queries), [pool.submit(self._score, q) for q in queries])

    def forward_prepared(
        self, batch: Any, *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        if not isinstance(batch, _InFlight):
            return self.forward(batch, distribution=distribution, top_k=top_k)
        try:
            self._check_forward(batch.queries, distribution, top_k)
            rows = [future.result() for future in batch.futures]
        except BaseException:
            batch.cancel()
            raise
        return self._output(batch.queries, rows, top_k)

    def release(self, batch: Any) -> None:
        if isinstance(batch, _InFlight):
            batch.cancel()

    def _check_forward(
        self, queries: Sequence[Query], distribution: bool, top_k: int | None
    ) -> None:
        if distribution:
            raise NotImplementedError(
                "a chat-completions server gives no full next-token distribution; "
                f"ask for top_k <= {self.top_logprobs} (VSI's top-k variant)"
            )
        if top_k is not None and not (self.logprobs and 1 <= top_k <= self.top_logprobs):
            raise NotImplementedError(
                f"top_k={top_k}: this backend serves top-k log-probs up to "
                f"{self.top_logprobs if self.logprobs else 0}"
            )
        if len(queries) == 0:
            raise ValueError("forward() needs at least one query")

    def _output(self, queries: Sequence[Query], rows: list[dict], top_k: int | None) -> BatchOutput:
        if top_k is not None and any("top" not in r for r in rows):
            raise NotImplementedError(
                f"{self.base_url} returned no top_logprobs: VSI's top-k variant needs them"
            )
        return _batch_output(queries, rows, top_k)

    def _map(self, fn, items: Sequence[Query]) -> list[dict]:
        if not items:
            return []
        if self.concurrency == 1:
            return [fn(q) for q in items]
        return list(self._http_pool().map(fn, items))

    def _http_pool(self) -> ThreadPoolExecutor:
        """The ``concurrency`` request threads (one per keep-alive connection), made once."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="benchc-http")
            return self._pool

    def notes(self) -> list[str]:
        """How many queries each path scored, and each capability the server lacked."""
        out = []
        where = f"{self.name} over {self.base_url}"
        if self.path_counts:
            parts = ", ".join(f"{n} by {path}" for path, n in sorted(self.path_counts.items()))
            out.append(f"{where}: queries scored {parts}")
        if self.client.dropped:
            fields = ", ".join(sorted(self.client.dropped))
            said = next(iter(self.client.dropped.values()))
            out.append(f"{where}: the server rejects {fields}; left out of requests ({said})")
        if self._n_cap is not None and self._n_cap < self.n_samples:
            out.append(
                f"{where}: the server returns at most {self._n_cap} choice(s) per request; "
                f"the {self.n_samples} samples of a query take several requests"
            )
        if self.client.retry_causes:
            causes = sorted(self.client.retry_causes.items(), key=lambda kv: (-kv[1], kv[0]))
            parts = ", ".join(f"{n} {cause}" for cause, n in causes)
            out.append(f"{where}: retries by cause: {parts}")
        if len(self.base_urls) > 1 and (self.client.answered or self.client.retried):
            per = "; ".join(
                f"{url.removesuffix('/chat/completions')} {self.client.answered[url]} answered, "
                f"{self.client.retried[url]} retried elsewhere"
                for url in self.client.urls
            )
            out.append(f"{self.name}: requests over {len(self.base_urls)} replicas: {per}")
        if self.not_sampling():
            out.append(
                f"WARNING: {where}: all {self._sampled} sampled queries got one identical reply "
                f"across their {self.n_samples} samples at temperature {self.temperature}: the "
                f"server does not sample (unless the model is certain of every answer), so the "
                f"sampling proxy's option distributions are spikes. Fix: {SAMPLING_FIXES}"
            )
        return out

    def not_sampling(self) -> bool:
        """Every sampled query so far (at least :data:`SPIKE_MIN_QUERIES`) had replies that never
        varied across seeds."""
        return self._sampled >= SPIKE_MIN_QUERIES and self._spikes == self._sampled

    # ------------------------------------------------------------------------ per query
    def _score(self, query: Query) -> dict:
        """One query's option logits (and its top-k on the log-prob route), on the run's route;
        on that route a top-k without every letter takes the sampling proxy (docs/spec.md §3)."""
        k = len(query.options)
        row: dict = {}
        route = self.settle_route(query)
        if route == ROUTE_SAMPLING:
            path = PATH_SAMPLING if not self.logprobs else PATH_NO_LOGPROBS
        else:
            key, top = self._probe_key(query), None
            with self._lock:
                if self._probed is not None and self._probed[0] == key:
                    top, self._probed = self._probed[1], None  # the probe's: not asked twice
            if top is None:
                top = self.top_tokens(query)
            letters = letter_logprobs(top, k)
            for _ in range(self.client.content_retries):
                if np.isfinite(letters).all():
                    break
                # re-asked: the same answer again is the server's, not a glitch
                self.client.count_retry(NO_LETTER)
                again = self.top_tokens(query)
                same = again == top
                top, letters = again, letter_logprobs(again, k)
                if same:
                    break
            row["top"] = top
            path = PATH_LOGPROBS if np.isfinite(letters).all() else PATH_OUTSIDE_TOPK
            if path == PATH_LOGPROBS:
                row["option_logits"] = letters
                row["option_mass"] = float(np.exp(letters).sum())
        if path != PATH_LOGPROBS:
            row.update(self._sampled_row(query))
        with self._lock:
            self.path_counts[path] += 1
        return row

    def _sampled_row(self, query: Query) -> dict:
        texts = self.sample_replies(query)
        row = np.zeros(len(query.options), dtype=np.int64)
        unparsed = 0
        for text in texts:
            idx = parse_letter(text, query.options)
            if idx is None:
                unparsed += 1
            else:
                row[idx] += 1
        if len(texts) >= 2:
            with self._lock:
                self._sampled += 1
                self._spikes += len({t.strip() for t in texts}) == 1
                warn = self._sampled == SPIKE_MIN_QUERIES and self.not_sampling()
            if warn:
                log.warning("%s", self.notes()[-1])
        return {
            "option_logits": np.log(jeffreys(row)),
            "option_mass": row.sum() / len(texts),
            "counts": row,
            "unparsed": unparsed,
        }

    def top_tokens(self, query: Query) -> list[tuple[str, float]]:
        """The served top-k (token text, log-prob) of the first answer token, best first. An
        answer without log-probs is a content fault (retried; :class:`ServerFault` when the
        server keeps answering without them: the run's route is never changed)."""

        def check(answer: Any) -> list[tuple[str, float]]:
            pairs = _top_pairs(answer)
            if pairs is None:
                raise ContentFault(NO_LOGPROBS, f"answer: {str(answer)[:200]}")
            return pairs

        return self._post(self._top_body(query), query, check)

    def _top_body(self, query: Query) -> dict:
        body = self.request_body(query, 1, self._seed(query, -1))
        body.update(temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        for field in ("top_p", "top_k"):
            body.pop(field, None)
        return body

    # ------------------------------------------------------------------------ requests
    def messages(self, query: Query) -> list[dict]:
        """The chat messages of ``query``: the white-box prompt, image as a PNG data URL (the
        cache's own bytes when the image came from it)."""
        text = _format_question(query.question, query.options, query.hint)
        image = query.image if query.encoded is not None else query.pixels()
        return chat_messages(text, image_url_part(image_data_url(image, query.encoded)))

    def request_body(self, query: Query, n: int, seed: int) -> dict:
        """The chat-completions sampling request for one query: every sampling parameter the
        proxy relies on stated (temperature, ``top_p`` 1, no top-k cut), thinking off."""
        return {
            "model": self.model,
            "messages": self.messages(query),
            "n": n,
            "temperature": self.temperature,
            "top_p": 1.0,
            "top_k": NO_TOP_K,
            "max_tokens": self.max_tokens,
            "seed": seed,
            "chat_template_kwargs": dict(NO_THINKING),
            **self.extra_body,
        }

    def complete(self, query: Query, *, n: int = 1, temperature: float | None = None) -> dict:
        """One raw chat-completions answer for ``query`` (``temperature`` 0: greedy)."""
        body = self.request_body(query, n, self._seed(query, 0))
        if temperature is not None:
            body["temperature"] = temperature
        return self._post(body, query)

    def _post(self, body: dict, query: Query, check: Callable[[Any], Any] | None = None) -> Any:
        """One request through the client (``check``: the route's answer check, retried like a
        transient fault); the first answer's model id and system fingerprint are kept
        (:attr:`served`: what the server says it runs, recorded in a baseline's identity)."""

        def keep(answer: Any) -> Any:
            if getattr(self, "served", None) is None and isinstance(answer, dict):
                self.served = {k: answer[k] for k in ("model", "system_fingerprint")
                               if answer.get(k)}  # fmt: skip
            return check(answer) if check is not None else answer

        return self.client.post(body, _what(query), keep)

    def sample_replies(self, query: Query) -> list[str]:
        """N reply texts, asking for all N at once and topping up with fresh seeds while the
        server returns fewer (a capped or ignored ``n``)."""
        replies: list[str] = []
        for attempt in range(self.n_samples):
            want = self.n_samples - len(replies)
            if want <= 0:
                break
            ask = min(want, self._n_cap or want)
            body = self.request_body(query, ask, self._seed(query, attempt))
            texts = self._post(body, query, _choice_texts)
            if len(texts) < ask and "n" not in self.client.dropped:
                with self._lock:
                    self._n_cap = min(self._n_cap or ask, len(texts))
            replies.extend(texts[:want])
        return replies

    def _seed(self, query: Query, attempt: int) -> int:
        """The request seed of ``query``'s ``attempt``: from the backend's seed, the text and
        the pixels' CRC-32 (:func:`~benchc.data.png.pixel_crc`, recorded in a cache
        file: a query sent from one is never decoded)."""
        from benchc.data.png import pixel_crc

        crc = query.pixel_crc if query.pixel_crc is not None else pixel_crc(query.pixels())
        h = hashlib.sha256()
        h.update(f"{self.seed}\0{attempt}\0{query.question}\0{query.hint}\0".encode())
        h.update("\0".join(query.options).encode())
        h.update(f"\0{crc}".encode())
        return int.from_bytes(h.digest()[:4], "big") >> 1


def _batch_output(queries: Sequence[Query], rows: Sequence[dict], top_k: int | None) -> BatchOutput:
    """The per-query rows as one :class:`BatchOutput` (NaN / -1 beyond a row's K)."""
    n, k_max = len(queries), max(len(q.options) for q in queries)
    counts = np.full((n, k_max), -1, dtype=np.int64)
    unparsed = np.zeros(n, dtype=np.int64)
    logits = np.full((n, k_max), np.nan, dtype=np.float32)
    mass = np.zeros(n, dtype=np.float32)
    for i, (q, row) in enumerate(zip(queries, rows, strict=True)):
        k = len(q.options)
        logits[i, :k] = row["option_logits"]
        mass[i] = row["option_mass"]
        if "counts" in row:
            counts[i, :k] = row["counts"]
            unparsed[i] = row["unparsed"]
    out: dict = {"option_logits": logits, "option_mass": mass}
    if any("counts" in r for r in rows):
        out.update(letter_counts=counts, n_unparsed=unparsed)
    if top_k is not None:
        # rows shorter than top_k (merged duplicate texts) are padded with -inf entries
        padded = [
            [*r["top"][:top_k], *((f"\0pad{j}", -np.inf) for j in range(top_k - len(r["top"])))]
            for r in rows
        ]
        out["top_ids"] = np.array([[token_id(t) for t, _ in r] for r in padded], np.int64)
        out["top_logprobs"] = np.array([[lp for _, lp in r] for r in padded], np.float32)
    return BatchOutput(**out)


def _choice_texts(answer: Any) -> list[str]:
    """The reply texts of a sampling answer; a content fault when it has none."""
    try:
        texts = [str(c["message"]["content"] or "") for c in answer["choices"]]
    except (KeyError, TypeError, IndexError) as err:
        raise ContentFault(NO_CHOICES, f"malformed answer: {str(answer)[:200]}") from err
    if not texts:
        raise ContentFault(NO_CHOICES, f"answer: {str(answer)[:200]}")
    return texts


def _top_pairs(answer: Any) -> list[tuple[str, float]] | None:
    """The first answer token's top-k (token, log-prob) pairs, tokens of one text merged, best
    first; None when the answer carries no (finite) log-probs."""
    try:
        content = answer["choices"][0]["logprobs"]["content"]
        top = content[0]["top_logprobs"]
        pairs = [(str(t["token"]), float(t["logprob"])) for t in top]
    except (KeyError, IndexError, TypeError, ValueError):
        return None
    if not pairs or not all(math.isfinite(lp) for _, lp in pairs):
        return None
    # Servers name tokens by text: tokens with the same text are one outcome here.
    merged: dict[str, float] = {}
    for token, lp in pairs:
        merged[token] = float(np.logaddexp(merged[token], lp)) if token in merged else lp
    return sorted(merged.items(), key=lambda p: (-p[1], p[0]))


def _what(query: Query) -> str:
    return f"sample {query.id!r}" if query.id is not None else "query"


__all__ = [
    "ROUTE_LOGPROBS",
    "ROUTE_SAMPLING",
    "OpenAIProxyBackend",
    "ProxyError",
    "RateLimiter",
    "ServerFault",
    "image_data_url",
    "jeffreys",
]
