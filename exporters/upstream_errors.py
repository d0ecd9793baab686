"""brownout_upstream_errors_total{host,kind}: upstreams brownout could not reach, with a bounded host label."""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter

__all__ = ["MAX_UPSTREAM_HOSTS", "UPSTREAM_ERROR_KINDS", "UpstreamErrors"]

# Why a connection to an upstream failed. "unreachable": no route to the host or network.
UPSTREAM_ERROR_KINDS = ("refused", "dns", "tls", "timeout", "unreachable", "other")
# A client picks the hosts (a typo, a scan of random names): the first ones keep their name, later ones are "other".
MAX_UPSTREAM_HOSTS = 50
_MAX_HOST_CHARS = 253  # the longest DNS name


class UpstreamErrors:
    """The counter and its label bounds; one per Metrics registry."""

    def __init__(self, registry: CollectorRegistry, *, max_hosts: int = MAX_UPSTREAM_HOSTS) -> None:
        self.counter = Counter(
            "brownout_upstream_errors",
            "Connections to an upstream that failed (refused, DNS, TLS, timeout, unreachable) by host and kind; "
            f"hosts after the first {max_hosts} are 'other'.",
            ["host", "kind"],
            registry=registry,
        )
        self._max_hosts = max_hosts
        self._hosts: set[str] = set()
        self._lock = threading.Lock()
        self._children: dict[tuple[str, str], Any] = {}

    def host_label(self, host: str) -> str:
        host = host.lower().rstrip(".")
        if host in self._hosts:
            return host
        with self._lock:
            if host and len(self._hosts) < self._max_hosts and len(host) <= _MAX_HOST_CHARS:
                self._hosts.add(host)
                return host
        return "other"

    def observe(self, host: str, kind: str) -> None:
        key = (self.host_label(host), kind if kind in UPSTREAM_ERROR_KINDS else "other")
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self.counter.labels(*key)
        child.inc()
