"""Loopback HTTP servers for the served path's tests: a handler base that answers JSON bytes
quietly, and a context manager that serves from a daemon thread."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class StubHandler(BaseHTTPRequestHandler):
    """A request handler whose subclasses write ``do_POST`` and answer with :meth:`reply`."""

    def reply(self, status: int, data: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def running(srv: ThreadingHTTPServer):
    """``srv`` serving from a daemon thread, shut down and closed afterwards."""
    thread = threading.Thread(target=srv.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
