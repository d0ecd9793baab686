"""A minimal keep-alive HTTP/1.1 client on asyncio streams, for load that the proxy, not the client, limits.

httpx costs about as much CPU per request as brownout does; on a 2-core machine it would be the
bottleneck. This client only frames: content-length or chunked bodies, nothing else.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

__all__ = ["RawConnection", "RawResponse"]


@dataclass
class RawResponse:
    """Status, lower-cased headers and the de-chunked body."""

    status: int
    headers: dict[str, str]
    body: bytes


class RawConnection:
    """One keep-alive connection; reconnects after a failure or a `connection: close`."""

    def __init__(self, host: str, port: int, *, timeout_s: float = 30.0) -> None:
        self.host, self.port, self.timeout_s = host, port, timeout_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self.last_headers: dict[str, str] = {}  # of the response being read, even when its body fails

    async def post_json(self, path: str, body: Any) -> RawResponse:
        data = json.dumps(body).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(data)}\r\n\r\n"
        ).encode()
        try:
            return await asyncio.wait_for(self._exchange(head + data), self.timeout_s)
        except BaseException:
            self.close()  # a half-read response poisons the connection
            raise

    async def get(self, path: str) -> RawResponse:
        head = f"GET {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n".encode()
        try:
            return await asyncio.wait_for(self._exchange(head), self.timeout_s)
        except BaseException:
            self.close()
            raise

    async def _exchange(self, request: bytes) -> RawResponse:
        self.last_headers = {}
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        self._writer.write(request)
        raw_head = await self._reader.readuntil(b"\r\n\r\n")
        lines = raw_head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        self.last_headers = headers
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = await self._chunked()
        elif "content-length" in headers:
            body = await self._reader.readexactly(int(headers["content-length"]))
        else:
            body = await self._reader.read()  # delimited by close
            self.close()
        if headers.get("connection", "").lower() == "close":
            self.close()
        return RawResponse(status, headers, body)

    async def _chunked(self) -> bytes:
        assert self._reader is not None
        parts: list[bytes] = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")  # no trailers expected: the empty line
                return b"".join(parts)
            parts.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
