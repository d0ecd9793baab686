"""Replaying a recorded realtime session: a local WebSocket server that plays the cassette's server side.

A replay hit on a WebSocket upgrade is routed here (as HTTP hits go to the replay relay), so the session
runs through the proxy as a live one does: the codec reads it, faults act on it, spans and invariants see
it. The server sends each recorded server message at its recorded time, counted from the last recorded
client message the client has sent: it waits for the client's messages, matched in order on their JSON
without the fields that change from run to run (event ids, audio and video payloads). A client message
that matches none is a replay miss (counted, logged, ignored). When the recording ends with the server's
close, the session closes with its code; otherwise it stays open until the client closes it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from brownout.core.guard import Guard
from brownout.proxy.record.recorded import Recorded
from brownout.proxy.record.redact import without_secrets
from brownout.proxy.wssession import WsClosed, WsSession, switching_protocols

__all__ = ["WsReplayServer", "normalised_message"]

log = logging.getLogger(__name__)

TOKEN_HEADER = "x-brownout-replay"
_VOLATILE = frozenset({"event_id", "audio", "video", "mediaChunks", "media_chunks"})
_MAX_HEAD = 64 * 1024


def normalised_message(data: bytes) -> Any:
    """What a client message is matched on: its JSON without the fields that change from run to run, and
    without the secrets recording leaves out (so a live message still matches its recorded self)."""
    data = without_secrets(data)
    try:
        doc = json.loads(data)
    except ValueError:
        return data
    return _strip(doc)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _VOLATILE}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


class WsReplayServer:
    """Plays registered recordings to the connections that present their token."""

    def __init__(self, guard: Guard, *, speed: Callable[[], float], on_miss: Callable[[], None]) -> None:
        self.guard = guard
        self.speed = speed
        self.on_miss = on_miss
        self.port = 0
        self._server: asyncio.Server | None = None
        self._waiting: dict[str, Recorded] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._count = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_MAX_HEAD)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is None:
            return
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        self._server = None
        self._waiting.clear()

    def register(self, recorded: Recorded) -> str:
        self._count += 1
        token = f"ws-{self._count}"
        self._waiting[token] = recorded
        return token

    def discard(self, token: str) -> None:
        self._waiting.pop(token, None)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            headers = _headers(head)
            recorded = self._waiting.pop(headers.get(TOKEN_HEADER, ""), None)
            key = headers.get("sec-websocket-key")
            if recorded is None or key is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                return
            writer.write(switching_protocols(key))
            ws = WsSession(reader, writer)
            await self.guard.acall("replay", self._play, ws, recorded, context=recorded.url)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            if task is not None:
                self._tasks.discard(task)
            writer.close()

    async def _play(self, ws: WsSession, rec: Recorded) -> None:
        messages = rec.messages or []
        loop = asyncio.get_running_loop()
        expected = [(i, normalised_message(m.data)) for i, m in enumerate(messages) if m.from_client]
        matched: dict[int, float] = {}
        arrived = asyncio.Event()
        closed = asyncio.Event()

        async def listen() -> None:
            nxt = 0
            try:
                while True:
                    data = await ws.recv()
                    raw = data.encode() if isinstance(data, str) else data
                    if nxt < len(expected) and normalised_message(raw) == expected[nxt][1]:
                        matched[expected[nxt][0]] = loop.time()
                        nxt += 1
                        arrived.set()
                    else:
                        self.on_miss()
                        log.warning(
                            "replay miss in a realtime session (%s): a client message the recording lacks", rec.url
                        )
            except (WsClosed, ConnectionError):
                closed.set()
                arrived.set()

        listener = asyncio.create_task(listen())
        try:
            anchor = (loop.time(), rec.headers_s)  # the session starts with the 101, here as when recorded
            for i, message in enumerate(messages):
                if message.from_client:
                    while i not in matched and not closed.is_set():
                        arrived.clear()
                        await arrived.wait()
                    if closed.is_set():
                        return
                    anchor = (matched[i], message.t)
                    continue
                speed = self.speed()
                if speed > 0:  # 0: at once
                    due = anchor[0] + (message.t - anchor[1]) / speed
                    await asyncio.sleep(max(0.0, due - loop.time()))
                if closed.is_set():
                    return
                try:  # the client may close while a server event is due: the session is over, not broken
                    await ws.send(message.data if message.binary else message.data.decode("utf-8", "replace"))
                except (WsClosed, ConnectionError):
                    return
            close = rec.close
            if close is not None and close.by == "server" and close.code is not None:
                await ws.close(close.code, close.reason)
                return
            await closed.wait()
        finally:
            listener.cancel()


def _headers(head: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out
