"""Upstreams brownout cannot reach: each failure counted, the first per host and kind logged as a warning.

Without this, a refused port, a misspelt host or an untrusted certificate shows up only as an agent
that fails: mitmproxy logs the cause at info level, which `brownout run` does not print. Failures are
taken where the connection fails (mitmproxy's `server_connect_error` and `tls_failed_server` hooks, and
the pacing relay's own client), so every kind of flow is covered, tunnelled ones included.
"""

from __future__ import annotations

import errno
import logging
import re
import socket
import ssl
from collections.abc import Callable

from mitmproxy.connection import Server
from mitmproxy.proxy.layers.tls import TlsData
from mitmproxy.proxy.server_hooks import ServerConnectionHookData

from brownout.core.guard import Guard

__all__ = ["Unreachable", "kind_of_error", "kind_of_message"]

log = logging.getLogger(__name__)

_ERRNO_KINDS = {
    errno.ECONNREFUSED: "refused",
    errno.ETIMEDOUT: "timeout",
    errno.ENETUNREACH: "unreachable",
    errno.EHOSTUNREACH: "unreachable",
    errno.ENETDOWN: "unreachable",
    errno.EHOSTDOWN: "unreachable",
    errno.EADDRNOTAVAIL: "unreachable",
}
# getaddrinfo's codes (socket.gaierror): negative on Linux, small positive numbers elsewhere.
_DNS_ERRNOS = frozenset(
    getattr(socket, name)
    for name in ("EAI_NONAME", "EAI_AGAIN", "EAI_FAIL", "EAI_NODATA", "EAI_ADDRFAMILY", "EAI_SERVICE")
    if hasattr(socket, name)
)
# A host with several addresses can fail differently on each (IPv6 unreachable, IPv4 refused): the
# more telling kind names the failure.
_PRECEDENCE = ("tls", "dns", "refused", "timeout", "unreachable", "other")
_CANCELLED = "connection cancelled"  # mitmproxy's word for a connect the client gave up on: no upstream failure
_HINTS = {
    "refused": "Nothing accepts connections there: is the server up, and is the port right?",
    "dns": "The name does not resolve: check the host name, and DNS on this machine.",
    "timeout": "The host did not answer: a firewall, or the wrong address?",
    "unreachable": "There is no route to it: check the address and this machine's network.",
}
MAX_LOGGED = 1000  # distinct (host, kind) pairs warned about; the rest are only counted


def _errno_kind(number: int) -> str:
    if number in _ERRNO_KINDS:
        return _ERRNO_KINDS[number]
    return "dns" if number in _DNS_ERRNOS else "other"


def _first(kinds: set[str]) -> str:
    return min(kinds, key=_PRECEDENCE.index) if kinds else "other"


def kind_of_message(message: str) -> str:
    """The kind of a connect failure from mitmproxy's message (it keeps the OSError's text, not the error)."""
    return _first({_errno_kind(int(n)) for n in re.findall(r"\[Errno (-?\d+)\]", message)})


def kind_of_error(exc: BaseException) -> str:
    """The kind of a failure from an exception and its causes (httpx wraps the OSError or SSLError)."""
    kinds: set[str] = set()
    todo: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, ssl.SSLError):
            kinds.add("tls")
        elif isinstance(e, socket.gaierror):
            kinds.add("dns")
        elif isinstance(e, OSError) and e.errno is not None:
            kinds.add(_errno_kind(e.errno))
        elif isinstance(e, TimeoutError):
            kinds.add("timeout")
        todo += [e.__cause__, e.__context__, *(e.exceptions if isinstance(e, BaseExceptionGroup) else ())]
    return _first(kinds - {"other"}) if kinds - {"other"} else kind_of_message(str(exc))


def _tls_hint(reason: str) -> str:
    low = reason.lower()
    if "certificate" in low or "unknown ca" in low:
        return (
            "Its certificate is not trusted: for a private CA, start brownout with "
            "--set ssl_verify_upstream_trusted_ca=CA.pem."
        )
    if "does not speak tls" in low or "wrong version number" in low:
        return "It answered without TLS: is it a plain http:// server?"
    return "The TLS handshake failed."


class Unreachable:
    """mitmproxy sub-addon: counts every failed upstream connection and warns once per host and kind."""

    def __init__(self, guard: Guard, *, on_error: Callable[[str, str], None], max_logged: int = MAX_LOGGED) -> None:
        """`on_error(host, kind)`: count one failure (the exporters' brownout_upstream_errors_total)."""
        self._guard = guard
        self._on_error = on_error
        self._max_logged = max_logged
        self._logged: set[tuple[str, str]] = set()

    def server_connect_error(self, data: ServerConnectionHookData) -> None:
        server = data.server
        reason = server.error or ""
        # Never tried (an addon refused it first) or given up by the client: nothing failed upstream.
        if server.timestamp_start is None or not server.address or reason == _CANCELLED:
            return
        host, port = server.address[0], server.address[1]
        self._guard.call("upstream", self.failed, host, port, kind_of_message(reason), reason)

    def tls_failed_server(self, data: TlsData) -> None:
        conn = data.conn
        if not isinstance(conn, Server) or not conn.address:
            return
        host, port = conn.address[0], conn.address[1]
        self._guard.call("upstream", self.failed, host, port, "tls", conn.error or "TLS handshake failed")

    def relay_failed(self, host: str, port: int, exc: BaseException) -> None:
        """The pacing relay (its own HTTP client) could not reach `host`."""
        self._guard.call("upstream", self.failed, host, port, kind_of_error(exc), str(exc) or repr(exc))

    def failed(self, host: str, port: int, kind: str, reason: str) -> None:
        """Count one failure; warn about the first of its host and kind."""
        self._on_error(host, kind)
        key = (host.lower(), kind)
        if key in self._logged or len(self._logged) >= self._max_logged:
            log.debug("upstream %s:%s unreachable (%s): %s", host, port, kind, reason)
            return
        self._logged.add(key)
        hint = _tls_hint(reason) if kind == "tls" else _HINTS.get(kind, "")
        log.warning(
            "cannot reach upstream %s:%s (%s): %s. %sLater %s failures for %s are only counted "
            "(brownout_upstream_errors_total).",
            host,
            port,
            kind,
            reason.rstrip("."),
            f"{hint} " if hint else "",
            kind,
            host,
        )
