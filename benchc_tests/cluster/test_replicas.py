"""The openai backend over two replicas of the reference server (``benchc.testing.serve``), one
answering 503 for a while (``-m cluster``): every query answered, and the option distributions
equal a single client's on one server within the served log-probs' tolerance."""

from __future__ import annotations

import numpy as np
import pytest

from benchc.models.hf import HFBackend
from benchc.suite.config import DEFAULT_MODEL, SuiteConfig
from benchc.suite.session import SuiteSession
from benchc.testing.serve import ChatServer, Quirks
from benchc_tests.unit.http_stub import running

pytestmark = pytest.mark.cluster

#: The served log-probs against the white box (benchc_tests/unit/test_proxy.py).
ATOL = 1e-4
CONDITIONS = ("clean", "fog-1")


def _scores(model: str, tmp_path, name: str) -> tuple[dict, list[str]]:
    cfg = SuiteConfig(model=model, limit=24, results_dir=tmp_path / name,
                      cache_dir=tmp_path / "cache")  # fmt: skip
    state = SuiteSession(cfg)
    return {k: state.run.condition(k) for k in CONDITIONS}, state.backend.notes()


def test_two_replicas_one_503ing_equal_one_server(tmp_path):
    servers = [ChatServer(HFBackend(DEFAULT_MODEL, batch_size=1), seed=0, quirks=q)
               for q in (Quirks(unavailable=8), Quirks())]  # fmt: skip
    with running(servers[0]), running(servers[1]):
        urls = ",".join(s.base_url for s in servers)
        spread, notes = _scores(f"openai:tiny-vlm@{urls}", tmp_path, "spread")
        busy_seen = servers[0].requests_seen
        single, _ = _scores(f"openai:tiny-vlm@{servers[1].base_url}", tmp_path, "single")
    assert busy_seen > 8  # the 503ing replica came back and took requests
    line = next(n for n in notes if "requests over 2 replicas" in n)
    assert "8 retried elsewhere" in line, notes
    for key in CONDITIONS:
        a, b = spread[key]["option_logits"], single[key]["option_logits"]
        assert np.isfinite(a).sum() == np.isfinite(b).sum() > 0  # none lost
        np.testing.assert_allclose(a, b, atol=ATOL)
        np.testing.assert_allclose(spread[key]["option_mass"], single[key]["option_mass"],
                                   atol=ATOL)  # fmt: skip
