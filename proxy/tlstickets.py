"""TLS 1.3 session tickets to a client leave with the first bytes brownout sends it, not at the handshake's end.

A TLS 1.3 server sends its NewSessionTicket messages as soon as it reads the client's Finished. Across a
network they reach the client a round trip after its first request went out. From a proxy on the same host they
arrive within microseconds, while the client is still writing that request. A client that reads on one thread
and writes on another then has OpenSSL process the tickets (a post-handshake handshake message) on one thread
while the other writes, on the same SSL object, which OpenSSL does not allow. The `websockets` sync client
does exactly that (its receiving thread starts before it sends the opening handshake), and so does the openai
SDK's sync realtime client, which uses it: now and then its opening handshake never gets a response (the SDK
gives up after 10 s). bench/tlstickets.py counts it on a loaded 2-core machine: in two runs, 6 and 2 of 600
connections hung with the tickets sent at once, none of 600 with them held.

OpenSSL's switch for that (`SSL_CTX_set_num_tickets(ctx, 0)`) is not in pyOpenSSL, and `SSL_OP_NO_TICKET`
only makes TLS 1.3 tickets stateful; they are still sent. So brownout holds them back: the client-side SSL
connection mitmproxy creates is wrapped, and what OpenSSL writes when the handshake completes stays in a buffer
until brownout first sends the client something or closes, then leaves ahead of it, in order (TLS records cannot
be dropped or reordered). The client gets the tickets with its first response, while it waits rather than
writes; resumption works as before.

This wraps the object mitmproxy 12.2's TLS layer drives (`do_handshake`, `bio_read`, `sendall`, `recv`; every
other attribute passes through). tests/proxy/test_tls_tickets.py holds it to its word.
"""

from __future__ import annotations

from typing import Any

from mitmproxy.tls import TlsData
from OpenSSL import SSL

__all__ = ["HeldTickets", "TicketHold"]

_CHUNK = 65535


class HeldTickets:
    """An `SSL.Connection` whose output from the end of the handshake waits for the first data sent."""

    __slots__ = ("_conn", "_held", "_holding")

    def __init__(self, conn: SSL.Connection) -> None:
        self._conn = conn
        self._held = bytearray()
        self._holding = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    @property
    def holding(self) -> int:
        """Bytes held back now (for tests and debugging)."""
        if self._holding:
            self._take()
        return len(self._held)

    def do_handshake(self) -> None:
        self._conn.do_handshake()  # raises WantReadError until the handshake is complete
        self._holding = True

    def bio_read(self, bufsiz: int) -> bytes:
        if self._holding:
            self._take()
            raise SSL.WantReadError()
        if self._held:
            out = bytes(self._held)
            self._held.clear()
            return out
        return self._conn.bio_read(bufsiz)

    def sendall(self, buf: bytes, flags: int = 0) -> int:
        self._release()
        return self._conn.sendall(buf, flags)

    def send(self, buf: bytes, flags: int = 0) -> int:
        self._release()
        return self._conn.send(buf, flags)

    def shutdown(self) -> bool:
        self._release()
        return self._conn.shutdown()

    def recv(self, bufsiz: int, flags: int | None = None) -> bytes:
        try:
            return self._conn.recv(bufsiz, flags)
        except (SSL.WantReadError, SSL.ZeroReturnError):
            raise
        except SSL.Error:
            self._release()  # an alert OpenSSL wrote must reach the client
            raise

    def _take(self) -> None:
        while True:
            try:
                self._held += self._conn.bio_read(_CHUNK)
            except SSL.WantReadError:
                return

    def _release(self) -> None:
        if self._holding:
            self._take()
            self._holding = False


class TicketHold:
    """mitmproxy addon: wraps each client-side TLS connection in `HeldTickets` (after TlsConfig created it)."""

    def tls_start_client(self, data: TlsData) -> None:
        if isinstance(data.ssl_conn, SSL.Connection):
            data.ssl_conn = HeldTickets(data.ssl_conn)  # type: ignore[assignment]
