"""Retries back off with jitter: threads of one backend that failed together spread out."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

import benchc.models.client as client_mod
from benchc.models.client import ChatClient, backoff_delay

N_RETRIERS = 32


def _first_retry_delays(seed: int, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """32 threads share one client; each gets one 503, sleeps, then succeeds. The sleeps are
    recorded instead of slept (virtual time)."""
    client = ChatClient("http://127.0.0.1:9", backoff_s=0.5, concurrency=N_RETRIERS)
    client.rng = random.Random(seed)
    answered: set[str] = set()
    delays: list[float] = []
    guard = threading.Lock()

    def send(body, url):
        with guard:
            me = threading.current_thread().name  # unique per thread (idents are reused)
            if me in answered:
                return 200, {"ok": True}, httpx.Headers(), None
            answered.add(me)
            return 503, {"error": "busy"}, httpx.Headers(), None

    def sleep(seconds: float) -> None:
        with guard:
            delays.append(seconds)

    monkeypatch.setattr(client, "_send", send)
    monkeypatch.setattr(client_mod, "time", SimpleNamespace(sleep=sleep, monotonic=time.monotonic))
    threads = [
        threading.Thread(target=client.post, args=({"model": "m"}, f"q{i}"))
        for i in range(N_RETRIERS)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(delays) == N_RETRIERS
    return sorted(delays)


def test_32_retriers_do_not_retry_in_lockstep(monkeypatch):
    delays = _first_retry_delays(0, monkeypatch)
    # the exponential floor is kept: attempt 0 with a 0.5 s base waits 0.25..0.5 s
    assert all(0.25 <= d <= 0.5 for d in delays)
    assert len(set(delays)) == N_RETRIERS  # no two threads retry at the same instant
    # spread over the window: 1.3 of the 32 per 10 ms slot on average, at most 6 in any
    # (without jitter all 32 share one instant)
    most_in_10ms = max(sum(1 for d in delays if lo <= d < lo + 0.01) for lo in delays)
    assert most_in_10ms <= 6
    assert max(delays) - min(delays) > 0.2


def test_the_jitter_is_deterministic_under_a_seeded_rng(monkeypatch):
    assert _first_retry_delays(7, monkeypatch) == _first_retry_delays(7, monkeypatch)
    assert _first_retry_delays(7, monkeypatch) != _first_retry_delays(8, monkeypatch)


def test_backoff_grows_and_never_undercuts_retry_after():
    rng = random.Random(3)
    for attempt in range(5):
        ceiling = 0.5 * 2**attempt
        for _ in range(50):
            assert ceiling / 2 <= backoff_delay(attempt, 0.5, None, rng) <= ceiling
            waited = backoff_delay(attempt, 0.5, 7.0, rng)
            assert 7.0 <= waited <= 7.0 + ceiling / 2  # honoured, and still spread
