"""A server benchc did not write: HF's ``transformers serve`` serving the embedded tiny VLM on
CPU on a loopback port, started once for the session and stopped after it (``-m servers``).

Why: the project's own reference server once hid a prompt-ordering bug that a real server
exposed at once (text part first: accuracy 0.175 instead of 0.825). Every test here talks to a
server whose request handling and chat templating benchc does not control.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from benchc_tests.unit.test_models_hf import tiny_model_dir

#: Seconds the server may take to load and answer ``/health`` (5-25 s seen on 2 cores).
START_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class Served:
    """A running server: the model id it answers to, its base URL, its log file."""

    model: str
    base_url: str
    log: Path
    process: subprocess.Popen

    @property
    def spec(self) -> str:
        """The ``--model`` string that scores this server's model."""
        return f"openai:{self.model}@{self.base_url}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, n: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no log)"


@pytest.fixture(scope="session")
def transformers_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``transformers serve fixtures/tiny-vlm --device cpu`` on a free loopback port."""
    model = str(tiny_model_dir())
    port = _free_port()
    log = tmp_path_factory.mktemp("transformers-serve") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", model,
           "--device", "cpu", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    with log.open("wb") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    served = Served(model, f"http://127.0.0.1:{port}/v1", log, proc)
    try:
        _wait_healthy(served)
        yield served
    finally:
        _stop(proc)


def _wait_healthy(served: Served) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    url = served.base_url.removesuffix("/v1") + "/health"
    while time.monotonic() < deadline:
        if served.process.poll() is not None:
            raise RuntimeError(
                f"transformers serve exited with {served.process.returncode}:\n{_tail(served.log)}"
            )
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(
        f"transformers serve not healthy after {START_TIMEOUT_S} s:\n{_tail(served.log)}"
    )


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group, SIGKILL it if it lingers: nothing is left running."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
