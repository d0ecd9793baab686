"""The server side of an accepted WebSocket on an asyncio stream, frames by wsproto.

wsproto (mitmproxy's own WebSocket codec, so no new dependency) does the framing; this module only moves
bytes between it and the stream. The demo upstream's realtime mocks and the realtime replay server use it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from wsproto.connection import Connection, ConnectionState, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Message, Ping, TextMessage
from wsproto.utilities import generate_accept_token

__all__ = ["WsClosed", "WsSession", "switching_protocols"]

log = logging.getLogger(__name__)


class WsClosed(Exception):
    """The peer closed the WebSocket (or the connection dropped)."""

    def __init__(self, code: int | None, reason: str = "") -> None:
        super().__init__(f"closed {code} {reason}".strip())
        self.code, self.reason = code, reason


class WsSession:
    """One accepted WebSocket: receive whole messages, send text or binary, close with a code."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._conn = Connection(ConnectionType.SERVER)
        self._parts: list[str | bytes] = []
        self._ready: list[str | bytes] = []
        self.close_code: int | None = None

    @property
    def open(self) -> bool:
        return self._conn.state is ConnectionState.OPEN

    async def recv(self) -> str | bytes:
        """The next whole message; WsClosed once the peer closed."""
        while not self._ready:
            if self.close_code is not None:
                raise WsClosed(self.close_code)
            data = await self._reader.read(65536)
            self._conn.receive_data(data or None)
            for event in self._conn.events():
                self._handle(event)
            await self._writer.drain()
        return self._ready.pop(0)

    async def recv_json(self) -> Any:
        return json.loads(await self.recv())

    def _handle(self, event: object) -> None:
        if isinstance(event, Message):
            self._parts.append(event.data)
            if event.message_finished:
                parts, self._parts = self._parts, []
                joined: str | bytes = "".join(parts) if isinstance(event, TextMessage) else b"".join(parts)  # type: ignore[arg-type]
                self._ready.append(joined)
        elif isinstance(event, Ping):
            self._writer.write(self._conn.send(event.response()))
        elif isinstance(event, CloseConnection):
            self.close_code = event.code
            if self._conn.state is ConnectionState.REMOTE_CLOSING:
                self._writer.write(self._conn.send(event.response()))

    async def send(self, data: str | bytes) -> None:
        if not self.open:
            raise WsClosed(self.close_code)
        event = TextMessage(data) if isinstance(data, str) else BytesMessage(data)
        self._writer.write(self._conn.send(event))
        await self._writer.drain()

    async def send_json(self, doc: Any, *, binary: bool = False) -> None:
        text = json.dumps(doc, separators=(",", ":"))
        await self.send(text.encode() if binary else text)

    async def close(self, code: int = 1000, reason: str = "") -> None:
        if self.open:
            self._writer.write(self._conn.send(CloseConnection(code, reason)))
            await self._writer.drain()
            try:  # the peer's closing frame, briefly: a mock does not wait on a broken client
                await asyncio.wait_for(self._drain_until_closed(), 2.0)
            except (TimeoutError, ConnectionError):
                pass
        self._writer.close()

    async def _drain_until_closed(self) -> None:
        while self._conn.state is not ConnectionState.CLOSED:
            data = await self._reader.read(65536)
            if not data:
                return
            self._conn.receive_data(data)
            for event in self._conn.events():
                if isinstance(event, CloseConnection):
                    self.close_code = event.code


def switching_protocols(key: str) -> bytes:
    """The 101 answer to a WebSocket upgrade whose Sec-WebSocket-Key is `key`."""
    return (
        b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
        b"sec-websocket-accept: " + generate_accept_token(key.encode()) + b"\r\nserver: brownout\r\n\r\n"
    )
