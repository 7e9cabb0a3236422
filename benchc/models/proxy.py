"""The black-box backend over an OpenAI-compatible chat API (vLLM, SGLang, TGI, OpenAI).

Per query, one request asks for the first answer token's ``top_logprobs`` (``max_tokens`` 1,
``top_logprobs`` 20). When the server returns them and every option letter is among them, the
option logit of letter L is the logsumexp of the log-probs of L's single-token variants
(``L``, `` L``, ``▁L``, ``ĠL``), exactly as SPEC 2 reads white-box logits: one request instead
of twenty. Otherwise (no log-probs from this server, or a letter outside the top-k) the query
falls back to the SPEC 3 sampling proxy: N samples at temperature 1.0, replies mapped to
letters by :mod:`benchc.models.parse`, p_k = (count_k + a) / (N_valid + a K) with Jeffreys
a = 0.5, ``option_logits`` = log p and ``option_mass`` = the share of replies that named an
option. Rows with no parsable reply are invalid (NaN), never a silent uniform guess. How many
queries took which path is counted in :attr:`OpenAIProxyBackend.path_counts`.

VSI needs the full next-token distribution, which a server does not give; ``forward(top_k=k)``
(k <= ``top_logprobs``) returns the served top-k instead, for VSI's documented top-k variant.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import math
import os
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

from benchc.models.base import Backend, BatchOutput, Capabilities, Query
from benchc.models.parse import PARSER_VERSION, parse_letter
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

#: HTTP statuses worth retrying (rate limit, transient server errors).
RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ProxyError(RuntimeError):
    """The API kept failing after all retries, or answered with a non-retryable error."""


def jeffreys(counts: np.ndarray, alpha: float = JEFFREYS_ALPHA) -> np.ndarray:
    """(count_k + a) / (N_valid + a K) along the last axis; NaN where N_valid = 0 (invalid)."""
    counts = np.asarray(counts, dtype=np.float64)
    n_valid = counts.sum(-1, keepdims=True)
    k = counts.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (counts + alpha) / (n_valid + alpha * k)
    return np.where(n_valid > 0, p, np.nan)


def image_data_url(image: np.ndarray) -> str:
    """A lossless PNG ``data:`` URL of an RGB uint8 array (OpenAI ``image_url`` content)."""
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(buf, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


#: Query paths counted in :attr:`OpenAIProxyBackend.path_counts`.
PATH_LOGPROBS = "logprobs"
PATH_NO_LOGPROBS = "sampling (server returned no logprobs)"
PATH_OUTSIDE_TOPK = "sampling (a letter outside the top-k)"
PATH_SAMPLING = "sampling (logprobs off)"

#: Spellings of a single-token letter variant as servers return token text (SPEC 2).
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


class OpenAIProxyBackend(Backend):
    """A model served behind ``POST {base_url}/chat/completions``: top-k log-probs first, the
    sampling proxy where they do not give every letter (see the module docstring).

    The API key is read from the environment variable ``api_key_env`` (no header when unset,
    e.g. for local servers). ``concurrency`` threads run queries of a batch in parallel,
    ``rate_limit`` caps request starts per second across them; each request is retried
    ``max_retries`` times with exponential backoff on network errors and retryable statuses.
    Request seeds derive from ``seed`` and the query, so a deterministic server gives identical
    results on rerun. ``logprobs=False`` asks for samples only (servers that reject logprobs).
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
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 120.0,
        rate_limit: float | None = None,
        max_tokens: int = 16,
        seed: int = 0,
        batch_size: int = 16,
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
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.n_samples = n_samples
        self.temperature = temperature
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.seed = seed
        self.batch_size = batch_size
        self.limiter = RateLimiter(rate_limit)
        #: Queries scored per path (``PATH_*``), in this process.
        self.path_counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._server_has_logprobs: bool | None = None  # learnt from the first answer
        self.name = slug(model)
        mode = f":lp{top_logprobs}" if logprobs else ""
        self.fingerprint = (
            f"openai:{model}@{self.base_url}:n{n_samples}:t{temperature}:{PROMPT_VERSION}:"
            f"{PARSER_VERSION}:seed{seed}{mode}"
        )
        self.capabilities = Capabilities(
            white_box=False,
            option_distribution="logprobs" if logprobs else "sampling",
            full_distribution=False,
            top_k=top_logprobs if logprobs else 0,
            vision_tower=False,
        )

    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
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
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            rows = list(pool.map(self._score, queries))
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
            if any("top" not in r for r in rows):
                raise NotImplementedError(f"{self.base_url} returned no top_logprobs")
            # rows shorter than top_k (merged duplicate texts) are padded with -inf entries
            padded = [
                [*r["top"][:top_k], *((f"\0pad{j}", -np.inf) for j in range(top_k - len(r["top"])))]
                for r in rows
            ]
            out["top_ids"] = np.array([[token_id(t) for t, _ in r] for r in padded], np.int64)
            out["top_logprobs"] = np.array([[lp for _, lp in r] for r in padded], np.float32)
        return BatchOutput(**out)

    def notes(self) -> list[str]:
        """How many queries each path scored (logprobs: one request each; sampling: N)."""
        if not self.path_counts:
            return []
        parts = ", ".join(f"{n} by {path}" for path, n in sorted(self.path_counts.items()))
        return [f"{self.name} over {self.base_url}: queries scored {parts}"]

    # ------------------------------------------------------------------------ per query
    def _score(self, query: Query) -> dict:
        """One query's option logits (and its top-k when served), by the first path that works."""
        k = len(query.options)
        row: dict = {}
        if not self.logprobs:
            path = PATH_SAMPLING
        elif self._server_has_logprobs is False:
            path = PATH_NO_LOGPROBS
        else:
            top = self.top_tokens(query)
            self._server_has_logprobs = top is not None
            if top is None:
                path = PATH_NO_LOGPROBS
            else:
                row["top"] = top
                letters = letter_logprobs(top, k)
                path = PATH_LOGPROBS if np.isfinite(letters).all() else PATH_OUTSIDE_TOPK
                if path == PATH_LOGPROBS:
                    row["option_logits"] = letters
                    row["option_mass"] = float(np.exp(letters).sum())
        if path != PATH_LOGPROBS:
            row.update(self._sampled(query))
        with self._lock:
            self.path_counts[path] += 1
        return row

    def _sampled(self, query: Query) -> dict:
        texts = self.sample_replies(query)
        row = np.zeros(len(query.options), dtype=np.int64)
        unparsed = 0
        for text in texts:
            idx = parse_letter(text, query.options)
            if idx is None:
                unparsed += 1
            else:
                row[idx] += 1
        return {
            "option_logits": np.log(jeffreys(row)),
            "option_mass": row.sum() / len(texts),
            "counts": row,
            "unparsed": unparsed,
        }

    def top_tokens(self, query: Query) -> list[tuple[str, float]] | None:
        """The served top-k (token text, log-prob) of the first answer token, best first;
        None when the server returns no log-probs."""
        body = self.request_body(query, 1, self._seed(query, -1))
        body.update(temperature=0.0, max_tokens=1, logprobs=True, top_logprobs=self.top_logprobs)
        answer = self._post(body, query)
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

    # ------------------------------------------------------------------------ HTTP
    def request_body(self, query: Query, n: int, seed: int) -> dict:
        """The chat-completions sampling request for one query (text first, then the image)."""
        text = _format_question(query.question, query.options, query.hint)
        return {
            "model": self.model,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": text},
                        {"type": "image_url", "image_url": {"url": image_data_url(query.image)}},
                    ],
                }
            ],
            "n": n,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": seed,
        }

    def sample_replies(self, query: Query) -> list[str]:
        """N reply texts, asking for all N at once and topping up if the API returns fewer."""
        replies: list[str] = []
        for attempt in range(self.n_samples):
            if len(replies) >= self.n_samples:
                break
            body = self.request_body(
                query, self.n_samples - len(replies), self._seed(query, attempt)
            )
            texts = _choice_texts(self._post(body, query), query)
            if not texts:
                raise ProxyError(f"{self.base_url} returned no choices for {_what(query)}")
            replies.extend(texts)
        return replies[: self.n_samples]

    def _seed(self, query: Query, attempt: int) -> int:
        h = hashlib.sha256()
        h.update(f"{self.seed}\0{attempt}\0{query.question}\0{query.hint}\0".encode())
        h.update("\0".join(query.options).encode())
        h.update(np.ascontiguousarray(query.image).tobytes())
        return int.from_bytes(h.digest()[:4], "big") >> 1

    def _post(self, body: dict, query: Query) -> dict:
        url = f"{self.base_url}/chat/completions"
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        what = _what(query)
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
            self.limiter.wait()
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                    return json.loads(resp.read().decode())
            except urllib.error.HTTPError as err:
                detail = err.read().decode(errors="replace")[:300]
                if err.code not in RETRY_STATUS:
                    raise ProxyError(f"{url} answered {err.code} for {what}: {detail}") from err
                last = err
            except (urllib.error.URLError, TimeoutError, ConnectionError, ValueError) as err:
                last = err
            log.warning("proxy request for %s failed (%s); attempt %d", what, last, attempt + 1)
        raise ProxyError(
            f"{url} failed for {what} after {self.max_retries + 1} attempts: {last}"
        ) from last


def _choice_texts(answer: dict, query: Query) -> list[str]:
    try:
        choices = answer["choices"]
        return [str(c["message"]["content"] or "") for c in choices]
    except (KeyError, TypeError) as err:
        raise ProxyError(
            f"malformed chat-completions reply for {_what(query)}: {str(answer)[:300]}"
        ) from err


def _what(query: Query) -> str:
    return f"sample {query.id!r}" if query.id is not None else "query"
