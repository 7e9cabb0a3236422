"""A minimal OpenAI-compatible chat-completions server around any :class:`HFBackend`.

It is the log-prob reference server of the tests (``python -m benchc.testing.serve --model DIR``)
and lets a local checkpoint stand in for a black-box API. Like vLLM, SGLang and
``transformers serve``, it renders the model's chat template from the request's messages *in
the order their parts arrive* (so it can never hide a prompt-ordering bug) with the request's
``chat_template_kwargs``, runs one forward pass and samples ``n`` first tokens from the
temperature-scaled next-token distribution (``top_p`` / ``top_k`` honoured), with a numpy RNG
seeded from the request's ``seed`` or, without one, from the server seed and body.
``logprobs: true`` with ``top_logprobs: k`` (k <= 20) adds OpenAI's per-token ``logprobs``
entry: the chosen token and the top-k of the untempered distribution, as vLLM returns them.

:class:`Quirks` makes it behave like servers that lack a capability (no log-probs, a capped or
ignored ``n``, fields rejected with 422, temperature ignored, 429 with ``Retry-After``), so each
of the client's fallbacks is tested over real HTTP; ``transformers serve`` is the real server
the ``servers`` tests use.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchc.data.images import to_rgb
from benchc.models.hf import HFBackend


@dataclass(frozen=True)
class Quirks:
    """Capabilities a real server may lack, switched on one by one for tests.

    ``logprobs=False``: log-prob fields are ignored (200, no ``logprobs``), as
    ``transformers serve`` does. ``max_n``: at most this many choices per request (1: ``n`` is
    ignored). ``reject``: request fields answered with 422 naming them (``opaque_errors``: a
    400 that names nothing). ``greedy_only``: temperature is ignored, every reply is the argmax
    (a server applying ``do_sample: false`` or ``top_k: 1`` from a checkpoint's defaults).
    ``throttle``: the first ``throttle`` requests get 429 with ``Retry-After: retry_after``.
    ``unavailable``: the first ``unavailable`` requests get 503 (a replica still loading, or
    overloaded, in a fleet).
    """

    logprobs: bool = True
    max_n: int | None = None
    reject: frozenset[str] = frozenset()
    opaque_errors: bool = False
    greedy_only: bool = False
    throttle: int = 0
    retry_after: str = "0"
    unavailable: int = 0


class HTTPError(ValueError):
    """A request the server answers with ``status`` (and optional headers)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.headers = headers or {}


class ChatServer(ThreadingHTTPServer):
    """Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` for one backend."""

    daemon_threads = True

    def __init__(
        self,
        backend: HFBackend,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
        quirks: Quirks = Quirks(),
    ):
        super().__init__((host, port), _Handler)
        self.backend = backend
        self.seed = seed
        self.quirks = quirks
        self.lock = threading.Lock()  # one forward at a time: deterministic and thread-safe
        self.requests_served = 0
        self.requests_seen = 0
        #: Every request body this server received, in arrival order (tests read it).
        self.bodies: list[dict] = []

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def complete(self, body: dict) -> dict:
        """The chat-completions answer for a parsed request body (raises ValueError if bad)."""
        self._admit(body)
        messages, image = template_messages(body)
        n = int(body.get("n", 1)) if self.quirks.max_n != 1 else 1
        if self.quirks.max_n is not None:
            n = min(n, self.quirks.max_n)
        temperature = float(body.get("temperature", 1.0))
        if not 1 <= n <= 1024:
            raise ValueError(f"n must be in 1..1024, got {n}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        kwargs = body.get("chat_template_kwargs") or {}
        if not isinstance(kwargs, dict):
            raise ValueError("chat_template_kwargs must be an object")
        with self.lock:
            prompt = self.backend.render_messages(messages, **kwargs)
            logprobs = self.backend.prompt_logprobs([image], [prompt])[0].double().cpu()
            self.requests_served += 1
        if temperature == 0 or self.quirks.greedy_only:
            ids = [int(torch.argmax(logprobs))] * n
        else:
            p = _sampling_distribution(logprobs, temperature, body)
            ids = _rng(body, self.seed).choice(len(p), size=n, p=p).tolist()
        tokenizer = self.backend.tokenizer
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": tokenizer.decode([tid])},
                "finish_reason": "length",
            }
            for i, tid in enumerate(ids)
        ]
        if body.get("logprobs") and self.quirks.logprobs:
            k = int(body.get("top_logprobs") or 0)
            if not 0 <= k <= 20:
                raise ValueError(f"top_logprobs must be in 0..20, got {k}")
            for choice, tid in zip(choices, ids, strict=True):
                choice["logprobs"] = {"content": [self._token_logprobs(logprobs, tid, k)]}
        return {
            "id": f"chatcmpl-{self.requests_served}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", self.backend.name),
            "choices": choices,
            "usage": {"completion_tokens": n},
        }

    def _admit(self, body: dict) -> None:
        """Record the request; raise the quirks' 429 / 422 / 400 where they apply."""
        with self.lock:
            self.requests_seen += 1
            self.bodies.append(body)
            throttled = self.requests_seen <= self.quirks.throttle
        if throttled:
            raise HTTPError(429, "rate limited", {"Retry-After": self.quirks.retry_after})
        if self.requests_seen <= self.quirks.unavailable:
            raise HTTPError(503, "service unavailable")
        rejected = sorted(set(body) & self.quirks.reject)
        if rejected and self.quirks.opaque_errors:
            raise HTTPError(400, "invalid request")
        if rejected:
            raise HTTPError(422, f"Unexpected fields in the request: {set(rejected)}")

    def _token_logprobs(self, logprobs: torch.Tensor, tid: int, k: int) -> dict:
        """OpenAI's per-token ``logprobs`` entry: the chosen token and the top-k alternatives
        of the (untempered) next-token distribution, as vLLM and OpenAI report them."""
        decode = self.backend.tokenizer.decode

        def entry(i: int) -> dict[str, Any]:
            text = decode([i])
            return {"token": text, "logprob": float(logprobs[i]), "bytes": list(text.encode())}

        top_ids = torch.topk(logprobs, k).indices.tolist() if k else []
        return {**entry(tid), "top_logprobs": [entry(i) for i in top_ids]}


def _sampling_distribution(logprobs: torch.Tensor, temperature: float, body: dict) -> np.ndarray:
    """softmax(logprobs / T), cut to the ``top_k`` most likely tokens (k > 0) and to the
    smallest set holding ``top_p`` of the mass (p < 1), renormalised."""
    p = torch.softmax(logprobs / temperature, dim=-1).numpy()
    top_k = int(body.get("top_k") or 0)
    top_p = float(body.get("top_p", 1.0) if body.get("top_p") is not None else 1.0)
    order = np.argsort(-p, kind="stable")
    keep = np.ones(len(p), dtype=bool)
    if 0 < top_k < len(p):
        keep[order[top_k:]] = False
    if top_p < 1.0:
        cum = np.cumsum(p[order])
        cut = int(np.searchsorted(cum, top_p)) + 1
        keep[order[cut:]] = False
    p = np.where(keep, p, 0.0)
    return p / p.sum()


def _rng(body: dict, server_seed: int) -> np.random.Generator:
    if body.get("seed") is not None:
        return np.random.default_rng(int(body["seed"]))
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    return np.random.default_rng([server_seed, int.from_bytes(digest[:8], "big")])


def template_messages(body: dict) -> tuple[list[dict], np.ndarray]:
    """The request's messages as chat-template input, parts kept in the order given, and the
    request's single image (a base64 ``data:`` URL in an ``image_url`` part)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("request has no 'messages' list")
    out: list[dict] = []
    images: list[np.ndarray] = []
    for message in messages:
        if not isinstance(message, dict) or "role" not in message:
            raise ValueError("every message needs a 'role'")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            raise ValueError("message content must be a string or a list of parts")
        parts = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                parts.append({"type": "text", "text": str(part.get("text", ""))})
            elif kind == "image_url":
                images.append(_decode_image((part.get("image_url") or {}).get("url", "")))
                parts.append({"type": "image"})
            else:
                raise ValueError(f"unsupported content part type {kind!r}")
        out.append({"role": message["role"], "content": parts})
    if len(images) != 1:
        raise ValueError(f"expected exactly one image_url part, got {len(images)}")
    return out, images[0]


def _decode_image(url: str) -> np.ndarray:
    head, sep, payload = url.partition(",")
    if not (sep and head.startswith("data:image/") and head.endswith(";base64")):
        raise ValueError("image_url must be a base64 data URL (data:image/...;base64,...)")
    image = to_rgb(Image.open(io.BytesIO(base64.b64decode(payload))))
    return np.asarray(image, dtype=np.uint8)


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length)
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        try:
            answer = self.server.complete(json.loads(raw))
        except HTTPError as err:
            self._send(err.status, {"error": {"message": str(err)}}, err.headers)
            return
        except (ValueError, KeyError, TypeError, OSError) as err:
            self._send(400, {"error": {"message": str(err)}})
            return
        self._send(200, answer)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.backend.name}]})
        elif self.path.rstrip("/") == "/health":
            self._send(200, {"status": "ok"})
        else:
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})

    def _send(self, status: int, payload: dict[str, Any], headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass


def build_server(argv: list[str] | None = None) -> ChatServer:
    """Parse the command line and load the model; the server is bound but not yet serving."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="checkpoint folder or hub id")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--no-logprobs", action="store_true", help="ignore log-prob fields")
    parser.add_argument("--max-n", type=int, default=None, help="choices per request at most")
    parser.add_argument("--reject", default="", help="comma-separated fields answered with 422")
    parser.add_argument("--greedy-only", action="store_true", help="ignore temperature")
    parser.add_argument("--unavailable", type=int, default=0, help="answer 503 to the first N")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    quirks = Quirks(
        logprobs=not args.no_logprobs,
        max_n=args.max_n,
        reject=frozenset(f for f in args.reject.split(",") if f),
        greedy_only=args.greedy_only,
        unavailable=args.unavailable,
    )
    backend = HFBackend(args.model, batch_size=1)
    return ChatServer(backend, args.host, args.port, args.seed, quirks)


def main(argv: list[str] | None = None) -> int:
    server = build_server(argv)
    print(f"serving {server.backend.name} at {server.base_url}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
