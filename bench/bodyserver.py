"""The upstream of bench/bodies.py: big, compressed and hostile bodies, from its own process.

    python -m bench.bodyserver --port 8400 --bomb /tmp/bomb.gz

`POST /v1/chat/completions?body=KIND` answers with:
- `plain`: an OpenAI chat stream of 80,000 events (about 12 MB), sent in 64 KB chunks;
- `gzip`: the same stream gzip-compressed (content-encoding: gzip);
- `noboundary`: a 16 MB text/event-stream with no event boundary;
- `bomb`: the gzip file given with --bomb as an application/json body (content-encoding: gzip);
- `json`: an OpenAI chat completion of about 24 MB (one long answer), with content-length.
Any other path answers a small JSON body (`/ping` for latency probes; a request bomb is read and
dropped). The server never decodes what it receives.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
from functools import cache
from pathlib import Path

__all__ = ["EVENTS", "big_completion", "main", "openai_stream"]

EVENTS = 80_000
CHUNK = 64 << 10


@cache
def openai_stream() -> bytes:
    """80,000 OpenAI chat.completion.chunk events and [DONE]: about 12 MB."""

    def event(i: int) -> bytes:
        choice = {"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}
        doc = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [choice]}
        return b"data: " + json.dumps(doc).encode() + b"\n\n"

    return b"".join(event(i) for i in range(EVENTS)) + b"data: [DONE]\n\n"


@cache
def big_completion() -> bytes:
    """A non-streamed chat.completion whose answer is about 24 MB of text."""
    message = {"role": "assistant", "content": "word " * (24 * (1 << 20) // 5)}
    doc = {"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini"}
    doc["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    return json.dumps(doc).encode()


class BodyServer:
    """Serves the bodies above; HTTP/1.1 with keep-alive, content-length request bodies only."""

    def __init__(self, bomb: bytes) -> None:
        self.bodies: dict[str, tuple[bytes, list[tuple[str, str]], bool]] = {
            "plain": (openai_stream(), [("content-type", "text/event-stream")], True),
            "gzip": (
                gzip.compress(openai_stream(), compresslevel=6, mtime=0),
                [("content-type", "text/event-stream"), ("content-encoding", "gzip")],
                True,
            ),
            "noboundary": (b"data: " + b"x" * (16 << 20) + b"\n\n", [("content-type", "text/event-stream")], True),
            "bomb": (bomb, [("content-type", "application/json"), ("content-encoding", "gzip")], False),
            "json": (big_completion(), [("content-type", "application/json")], False),
        }

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                target = lines[0].split(" ")[1]
                length = next(
                    (int(v) for k, _, v in (ln.partition(":") for ln in lines) if k.lower() == "content-length"), 0
                )
                while length > 0:  # read and drop: the server never inflates what it gets
                    length -= len(await reader.read(min(length, 1 << 20)))
                await self._answer(target, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _answer(self, target: str, writer: asyncio.StreamWriter) -> None:
        kind = target.partition("body=")[2].split("&")[0]
        if kind not in self.bodies:
            body = b'{"ok": true}'
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            return
        body, headers, chunked = self.bodies[kind]
        head = "HTTP/1.1 200 OK\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
        head += "transfer-encoding: chunked\r\n\r\n" if chunked else f"content-length: {len(body)}\r\n\r\n"
        writer.write(head.encode("latin-1"))
        for i in range(0, len(body), CHUNK):
            piece = body[i : i + CHUNK]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            await writer.drain()
        if chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()


async def serve(port: int, bomb: bytes) -> None:
    server = await asyncio.start_server(BodyServer(bomb).handle, "127.0.0.1", port, limit=1 << 20)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--bomb", type=Path, required=True, help="a gzip file to serve as the response bomb")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.bomb.read_bytes()))


if __name__ == "__main__":
    main()
