"""A stand-in OpenTelemetry Collector: an OTLP/HTTP server that keeps what it was sent, byte for byte."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler

from tests.threadserver import serving_handler

__all__ = ["Collector", "Posted", "collector"]


@dataclass(frozen=True)
class Posted:
    path: str
    content_type: str
    body: bytes


@dataclass
class Collector:
    url: str = ""
    posted: list[Posted] = field(default_factory=list)
    status: int = 200  # what it answers
    arrived: threading.Event = field(default_factory=threading.Event)

    def wait(self, n: int = 1, timeout_s: float = 10.0) -> list[Posted]:
        for _ in range(int(timeout_s / 0.02)):
            if len(self.posted) >= n:
                break
            self.arrived.wait(0.02)
        assert len(self.posted) >= n, f"the collector got {len(self.posted)} requests, not {n}"
        return self.posted


@contextmanager
def collector() -> Iterator[Collector]:
    got = Collector()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            got.posted.append(Posted(self.path, self.headers.get("Content-Type", ""), body))
            got.arrived.set()
            json_body = "json" in self.headers.get("Content-Type", "")
            out = b"{}" if json_body else b""
            self.send_response(got.status)
            self.send_header("Content-Type", "application/json" if json_body else "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    with serving_handler(Handler) as url:
        got.url = url
        yield got
