"""A minimal OpenAI-compatible chat-completions server around any :class:`HFBackend`.

It lets the sampling proxy be tested end to end against a real model over real HTTP, and lets
a local checkpoint stand in for a black-box API: ``python -m benchc.models.serve --model DIR``.
Each request runs one forward pass and samples ``n`` first tokens from the temperature-scaled
next-token distribution (a reply may be any token, so unparsable replies are real), with a
numpy RNG seeded from the request's ``seed`` or, without one, from the server seed and body.
``logprobs: true`` with ``top_logprobs: k`` (k <= 20) adds OpenAI's per-token ``logprobs``
entry: the chosen token and the top-k of the untempered distribution, as vLLM returns them.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchc.data.images import to_rgb
from benchc.models.hf import HFBackend


class ChatServer(ThreadingHTTPServer):
    """Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` for one backend."""

    daemon_threads = True

    def __init__(self, backend: HFBackend, host: str = "127.0.0.1", port: int = 0, seed: int = 0):
        super().__init__((host, port), _Handler)
        self.backend = backend
        self.seed = seed
        self.lock = threading.Lock()  # one forward at a time: deterministic and thread-safe
        self.requests_served = 0

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def complete(self, body: dict) -> dict:
        """The chat-completions answer for a parsed request body (raises ValueError if bad)."""
        text, image = _user_turn(body)
        n = int(body.get("n", 1))
        temperature = float(body.get("temperature", 1.0))
        if not 1 <= n <= 1024:
            raise ValueError(f"n must be in 1..1024, got {n}")
        if temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {temperature}")
        with self.lock:
            logprobs = self.backend.next_token_logprobs([image], [text])[0].double().cpu()
            self.requests_served += 1
        if temperature == 0:
            ids = [int(torch.argmax(logprobs))] * n
        else:
            p = torch.softmax(logprobs / temperature, dim=-1).numpy()
            ids = _rng(body, self.seed).choice(len(p), size=n, p=p / p.sum()).tolist()
        tokenizer = self.backend.tokenizer
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": tokenizer.decode([tid])},
                "finish_reason": "length",
            }
            for i, tid in enumerate(ids)
        ]
        if body.get("logprobs"):
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

    def _token_logprobs(self, logprobs: torch.Tensor, tid: int, k: int) -> dict:
        """OpenAI's per-token ``logprobs`` entry: the chosen token and the top-k alternatives
        of the (untempered) next-token distribution, as vLLM and OpenAI report them."""
        decode = self.backend.tokenizer.decode

        def entry(i: int) -> dict[str, Any]:
            text = decode([i])
            return {"token": text, "logprob": float(logprobs[i]), "bytes": list(text.encode())}

        top_ids = torch.topk(logprobs, k).indices.tolist() if k else []
        return {**entry(tid), "top_logprobs": [entry(i) for i in top_ids]}


def _rng(body: dict, server_seed: int) -> np.random.Generator:
    if body.get("seed") is not None:
        return np.random.default_rng(int(body["seed"]))
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).digest()
    return np.random.default_rng([server_seed, int.from_bytes(digest[:8], "big")])


def _user_turn(body: dict) -> tuple[str, np.ndarray]:
    """Text and the single image of the last user message (image as a base64 data URL)."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("request has no 'messages' list")
    content = messages[-1].get("content")
    if not isinstance(content, list):
        raise ValueError("the last message needs list content with one image_url part")
    texts = [c.get("text", "") for c in content if c.get("type") == "text"]
    urls = [c.get("image_url", {}).get("url", "") for c in content if c.get("type") == "image_url"]
    if len(urls) != 1:
        raise ValueError(f"expected exactly one image_url part, got {len(urls)}")
    head, sep, payload = urls[0].partition(",")
    if not (sep and head.startswith("data:image/") and head.endswith(";base64")):
        raise ValueError("image_url must be a base64 data URL (data:image/...;base64,...)")
    image = to_rgb(Image.open(io.BytesIO(base64.b64decode(payload))))
    return "\n".join(texts), np.asarray(image, dtype=np.uint8)


class _Handler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_POST(self) -> None:
        if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})
            return
        try:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            answer = self.server.complete(body)
        except (ValueError, KeyError, TypeError, OSError) as err:
            self._send(400, {"error": {"message": str(err)}})
            return
        self._send(200, answer)

    def do_GET(self) -> None:
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [{"id": self.server.backend.name}]})
        else:
            self._send(404, {"error": {"message": f"unknown path {self.path}"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
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
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    return ChatServer(HFBackend(args.model, batch_size=1), args.host, args.port, args.seed)


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
