"""Measuring a case from the side: this process's peak RSS, and how long another client waits meanwhile.

Proxy, upstream and clients of these tests all live in the test process, so its RSS is the
proxy's plus a constant; `RssPeak` samples it every 20 ms. `OtherClient` keeps sending small
requests through the same proxy on its own connection and records the slowest answer: a proxy
whose event loop is blocked (a body decoded in one go) shows up as one long wait.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

__all__ = ["OtherClient", "RssPeak", "rss_bytes"]


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


class RssPeak:
    """Samples this process's RSS (proxy, upstream and client all live here) every 20 ms."""

    def __init__(self) -> None:
        self.start = rss_bytes()
        self.peak = self.start
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    @property
    def growth(self) -> int:
        return self.peak - self.start

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> RssPeak:
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self.peak = max(self.peak, rss_bytes())


class OtherClient:
    """Another agent on the same proxy: GETs `url` back to back and keeps the worst latency."""

    def __init__(self, proxy: Any, url: str) -> None:
        self.url = url
        self.worst_s = 0.0
        self.answered = 0
        self.failures: list[str] = []
        self._client = httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=30, verify=False)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                self._client.get(self.url).raise_for_status()
                self.answered += 1
            except httpx.HTTPError as e:
                self.failures.append(repr(e))
            self.worst_s = max(self.worst_s, time.monotonic() - t0)
            self._stop.wait(0.01)

    def __enter__(self) -> OtherClient:
        self._client.get(self.url)  # connected and warm before the case starts
        self._t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._t.join()
        self._client.close()
