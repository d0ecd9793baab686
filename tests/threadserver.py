"""A stdlib HTTP server on a thread, for tests whose upstream is a BaseHTTPRequestHandler."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["serving_handler"]


@contextlib.contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """`handler` served on 127.0.0.1 (a free port) until the block ends; yields `http://127.0.0.1:PORT`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
