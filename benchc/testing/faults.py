"""A loopback OpenAI-compatible chat server that injects faults on a deterministic schedule.

Why: the served path's promise (a glitch is not a regression) is only as good as the faults it
was tried against. Answers are a pure function of the request's decoded pixels and text (a
synthetic "model": four option letters with log-probs drawn from their hash), so a run against
it is reproducible bit for bit, and a fault-free run is the reference a faulty one must equal.

A :class:`FaultPlan` picks the faulty requests by the hash of their body (the same request
re-sent is the same body: the client's retries send identical bytes), so which requests fail
does not depend on thread timing; a faulty body fails its first ``repeat`` attempts (``None``:
every attempt, a permanent fault). Kinds: ``500`` / ``503`` / ``429`` (``retry_after`` sets a
``Retry-After`` header), ``drop`` (the connection closed without an answer), ``malformed`` (a
200 that is not JSON), ``slow`` (answered after ``delay_s``), ``hang`` (never answered: the
handler waits ``delay_s`` at most, then closes), ``no_logprobs`` (a 200 without the
``logprobs`` field), ``no_letter`` (a top-k without any option letter), and ``down`` (every
request dropped for ``delay_s`` seconds after the first: a server restart). Used by the tests
(``benchc_tests/unit/test_served_faults.py``) and ``benchmarks/bench_faults.py``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from PIL import Image

#: Fault kinds a :class:`FaultPlan` injects.
KINDS = (
    "500",
    "503",
    "429",
    "drop",
    "malformed",
    "slow",
    "hang",
    "no_logprobs",
    "no_letter",
    "down",
)
_LETTERS = "ABCD"
_FILLERS = ("The", "I", "Answer", ".", "\n", "It", "This", "A1", "none", "Option")


@dataclass(frozen=True)
class FaultPlan:
    """Which requests fail and how: a ``rate`` share of request bodies (by hash and ``seed``),
    on their first ``repeat`` attempts (``None``: always). ``only``: a substring the body must
    contain to be eligible (a sample's question, to fault one sample's requests)."""

    kind: str | None = None
    rate: float = 0.0
    repeat: int | None = 1
    seed: int = 0
    retry_after: str | None = None
    delay_s: float = 0.0
    only: str | None = None
    logprobs: bool = True  # False: a server that never gives log-probs (``transformers serve``)

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in KINDS:
            raise ValueError(f"fault kind must be one of {', '.join(KINDS)}, got {self.kind!r}")


class FaultServer(ThreadingHTTPServer):
    """Serves ``POST /v1/chat/completions`` by the synthetic model, faults by ``plan``."""

    daemon_threads = True

    def __init__(self, plan: FaultPlan = FaultPlan(), host: str = "127.0.0.1") -> None:
        super().__init__((host, 0), _Handler)
        self.plan = plan
        self.lock = threading.Lock()
        #: Attempts seen per body digest, the faults injected by kind and per body digest.
        self.attempts: Counter[str] = Counter()
        self.injected: Counter[str] = Counter()
        self.faulted: Counter[str] = Counter()  # faults per body digest
        self.requests = 0
        self.first_at: float | None = None
        self.closing = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet about clients that hung up (a client's timeout ends the ``slow`` answers)."""
        import sys

        if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            super().handle_error(request, client_address)

    def replan(self, plan: FaultPlan) -> None:
        """Fault by ``plan`` from now on, every body's attempts counted afresh (the same URL, so
        a rerun keeps its run key)."""
        with self.lock:
            self.plan = plan
            self.attempts.clear()
            self.first_at = None

    @property
    def base_url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/v1"

    def fault_for(self, raw: bytes) -> str | None:
        """This request's fault (counted), or None."""
        plan = self.plan
        digest = hashlib.sha256(raw).hexdigest()
        with self.lock:
            self.requests += 1
            self.attempts[digest] += 1
            attempt = self.attempts[digest]
            now = time.monotonic()
            self.first_at = now if self.first_at is None else self.first_at
            if plan.kind == "down":
                fault = "down" if now - self.first_at < plan.delay_s else None
            elif plan.kind is None or (plan.only is not None and plan.only.encode() not in raw):
                fault = None
            else:
                draw = int(hashlib.sha256(f"{plan.seed}:{digest}".encode()).hexdigest()[:12], 16)
                chosen = draw / 16**12 < plan.rate
                fault = (
                    plan.kind
                    if chosen and (plan.repeat is None or attempt <= plan.repeat)
                    else None
                )
            if fault is not None:
                self.injected[fault] += 1
                self.faulted[digest] += 1
        return fault

    def answer(self, body: dict) -> dict:
        """The synthetic model's chat-completions answer: a pure function of the request."""
        text = _content_key(body.get("messages"))
        logits = _letter_logits(text)
        n = int(body.get("n") or 1)
        temperature = float(body.get("temperature", 1.0))
        if temperature == 0:
            letters = [_LETTERS[int(np.argmax(logits))]] * n
        else:
            p = np.exp(logits / temperature)
            rng = np.random.default_rng([int(body.get("seed") or 0), _digest_int(text)])
            letters = [_LETTERS[i] for i in rng.choice(4, size=n, p=p / p.sum())]
        choices: list[dict[str, Any]] = [
            {"index": i, "message": {"role": "assistant", "content": c}, "finish_reason": "stop"}
            for i, c in enumerate(letters)
        ]
        if body.get("logprobs") and self.plan.logprobs:
            k = int(body.get("top_logprobs") or 0)
            top = _top_logprobs(logits, text)[:k]
            choices[0]["logprobs"] = {
                "content": [
                    {"token": letters[0], "logprob": top[0]["logprob"], "top_logprobs": top}
                ]
            }
        return {"id": "chatcmpl-fault", "object": "chat.completion", "choices": choices}


def _content_key(messages: Any) -> bytes:
    """The request's text with each image replaced by its decoded pixels' digest: the same
    pixels sent as other PNG bytes get the same answer, as from a real model."""

    def swap(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("type") == "image_url":
                url = (value.get("image_url") or {}).get("url", "")
                png = base64.b64decode(url.partition(",")[2])
                pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
                return hashlib.sha256(pixels.tobytes()).hexdigest()
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    return json.dumps(swap(messages), sort_keys=True).encode()


def _digest_int(data: bytes) -> int:
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big")


def _letter_logits(text: bytes) -> np.ndarray:
    """Four option log-probs (summing with the fillers to below 1), from the request's bytes."""
    rng = np.random.default_rng(_digest_int(text))
    scores = rng.normal(0.0, 1.5, size=4)
    return scores - np.log(np.exp(scores).sum()) + np.log(0.9)


def _top_logprobs(logits: np.ndarray, text: bytes) -> list[dict[str, Any]]:
    """The four letters and ten filler tokens sharing the remaining 0.1, best first."""
    rng = np.random.default_rng(_digest_int(text) + 1)
    filler = rng.dirichlet(np.ones(len(_FILLERS))) * 0.1
    entries = [
        (f" {L}" if i % 2 else L, float(lp))
        for i, (L, lp) in enumerate(zip(_LETTERS, logits, strict=True))
    ]
    entries += [(t, float(np.log(p))) for t, p in zip(_FILLERS, filler, strict=True)]
    entries.sort(key=lambda e: (-e[1], e[0]))
    return [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in entries]


class _Handler(BaseHTTPRequestHandler):
    server: FaultServer
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        fault = self.server.fault_for(raw)
        plan = self.server.plan
        if fault in ("drop", "down"):
            self.close_connection = True
            return
        if fault == "hang":
            self.server.closing.wait(plan.delay_s)  # bounded: then the connection closes
            self.close_connection = True
            return
        if fault in ("500", "503", "429"):
            headers = {"Retry-After": plan.retry_after} if plan.retry_after is not None else {}
            self._send(
                int(fault),
                json.dumps({"error": {"message": f"injected {fault}"}}).encode(),
                headers,
            )
            return
        if fault == "malformed":
            self._send(200, b'{"choices": [{"index": 0, "mess')
            return
        if fault == "slow":
            self.server.closing.wait(plan.delay_s)
        answer = self.server.answer(json.loads(raw))
        if fault == "no_logprobs":
            for choice in answer["choices"]:
                choice.pop("logprobs", None)
        elif fault == "no_letter":
            for choice in answer["choices"]:
                for entry in choice.get("logprobs", {}).get("content", []):
                    entry["top_logprobs"] = [
                        t for t in entry["top_logprobs"] if t["token"].strip() not in _LETTERS
                    ]
        self._send(200, json.dumps(answer).encode())

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def fault_server(plan: FaultPlan = FaultPlan()) -> Iterator[FaultServer]:
    """A :class:`FaultServer` serving from a daemon thread; hanging handlers are released and
    the server closed afterwards."""
    srv = FaultServer(plan)
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.closing.set()
        srv.shutdown()
        srv.server_close()


__all__ = ["KINDS", "FaultPlan", "FaultServer", "fault_server"]
