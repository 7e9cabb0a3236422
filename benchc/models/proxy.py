"""The black-box sampling proxy (SPEC section 3) over an OpenAI-compatible chat API.

Each query is asked N times at temperature 1.0; replies are mapped to letters by
:mod:`benchc.models.parse`, and p_k = (count_k + a) / (N_valid + a K) with Jeffreys a = 0.5.
``option_logits`` are log p (so softmax returns p exactly); ``option_mass`` is the share of
replies that named an option (the sampling analogue of the letters' vocabulary mass). Rows with
no parsable reply are invalid: NaN option logits, never a silent uniform guess.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import logging
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from PIL import Image

from benchc.models.base import Backend, BatchOutput, Query
from benchc.models.parse import PARSER_VERSION, parse_letter
from benchc.models.source import slug
from benchc.spec import JEFFREYS_ALPHA, PROMPT_VERSION, PROXY_SAMPLES, PROXY_TEMPERATURE
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


class OpenAIProxyBackend(Backend):
    """Sampling proxy for a model served behind ``POST {base_url}/chat/completions``.

    The API key is read from the environment variable ``api_key_env`` (no header when unset,
    e.g. for local servers). ``concurrency`` threads run queries of a batch in parallel; each
    request is retried ``max_retries`` times with exponential backoff on network errors and
    retryable statuses. Request seeds derive from ``seed`` and the query, so a deterministic
    server gives identical counts on rerun.
    """

    def __init__(
        self,
        model: str,
        base_url: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        n_samples: int = PROXY_SAMPLES,
        temperature: float = PROXY_TEMPERATURE,
        concurrency: int = 4,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        timeout_s: float = 120.0,
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
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.n_samples = n_samples
        self.temperature = temperature
        self.concurrency = concurrency
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.seed = seed
        self.batch_size = batch_size
        self.name = slug(model)
        self.fingerprint = (
            f"openai:{model}@{self.base_url}:n{n_samples}:t{temperature}:{PROMPT_VERSION}:"
            f"{PARSER_VERSION}:seed{seed}"
        )

    @property
    def white_box(self) -> bool:
        return False

    def forward(
        self, queries: Sequence[Query], *, distribution: bool = False, top_k: int | None = None
    ) -> BatchOutput:
        if distribution or top_k is not None:
            raise NotImplementedError(
                "the sampling proxy sees only sampled replies, not a next-token distribution"
            )
        if len(queries) == 0:
            raise ValueError("forward() needs at least one query")
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            replies = list(pool.map(self.sample_replies, queries))
        k_max = max(len(q.options) for q in queries)
        counts = np.full((len(queries), k_max), -1, dtype=np.int64)
        unparsed = np.zeros(len(queries), dtype=np.int64)
        logits = np.full((len(queries), k_max), np.nan, dtype=np.float32)
        mass = np.zeros(len(queries), dtype=np.float32)
        for i, (q, texts) in enumerate(zip(queries, replies, strict=True)):
            k = len(q.options)
            row = np.zeros(k, dtype=np.int64)
            for text in texts:
                idx = parse_letter(text, q.options)
                if idx is None:
                    unparsed[i] += 1
                else:
                    row[idx] += 1
            counts[i, :k] = row
            logits[i, :k] = np.log(jeffreys(row))
            mass[i] = row.sum() / len(texts)
        return BatchOutput(
            option_logits=logits, option_mass=mass, letter_counts=counts, n_unparsed=unparsed
        )

    # ------------------------------------------------------------------------ HTTP
    def request_body(self, query: Query, n: int, seed: int) -> dict:
        """The chat-completions request for one query (text first, then the image)."""
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
