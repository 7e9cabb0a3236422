"""Before an exporter's first network call: can its service be reached within a few seconds?

Without this check an unreachable MLflow server stalled a finished run for minutes (the
client's own retries), W&B with no network for minutes more, and the Hub printed a retry line
per attempt. One TCP connection to the service's host, given :func:`timeout` seconds
(``BENCHC_EXPORT_TIMEOUT``, default :data:`DEFAULT_TIMEOUT`), answers it first; a service that
cannot be reached is one line naming it, the address and the setting.
"""

from __future__ import annotations

import os
import socket
import threading
from urllib.parse import urlsplit

from benchc.export import ExportError

#: Seconds an exporter waits for its service to accept a connection.
DEFAULT_TIMEOUT = 5.0
#: The environment variable that changes it.
TIMEOUT_ENV = "BENCHC_EXPORT_TIMEOUT"


def timeout() -> float:
    """``BENCHC_EXPORT_TIMEOUT`` in seconds (a positive number), else :data:`DEFAULT_TIMEOUT`."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ExportError(f"{TIMEOUT_ENV}={text!r} is not a positive number of seconds")
    return value


def _address(url: str) -> tuple[str, int] | None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


def _connect(address: tuple[str, int], wait: float) -> str | None:
    """None when a TCP connection to ``address`` opens within ``wait`` seconds, else why not.
    Name resolution is inside the wait too (a resolver without network can take longer than a
    connection attempt), so the attempt runs in a daemon thread."""
    outcome: list[str | None] = []

    def attempt() -> None:
        try:
            socket.create_connection(address, timeout=wait).close()
            outcome.append(None)
        except OSError as exc:
            outcome.append(exc.strerror or type(exc).__name__)

    worker = threading.Thread(target=attempt, daemon=True, name="benchc-export-reach")
    worker.start()
    worker.join(wait)
    return outcome[0] if outcome else f"no answer within {wait:g} s"


def check(service: str, url: str) -> None:
    """Raise one :class:`ExportError` when ``service`` at ``url`` (http/https; other schemes
    are local and not checked) cannot be reached within :func:`timeout` seconds."""
    address = _address(url)
    if address is None:
        return
    wait = timeout()
    why = _connect(address, wait)
    if why is not None:
        raise ExportError(
            f"{service} at {url} is unreachable ({why}); nothing was sent (set {TIMEOUT_ENV} "
            f"to wait longer than {wait:g} s)"
        )


__all__ = ["DEFAULT_TIMEOUT", "TIMEOUT_ENV", "check", "timeout"]
