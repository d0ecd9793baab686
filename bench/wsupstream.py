"""A realtime upstream for the benchmark: OpenAI Realtime's event shapes, every output delta stamped.

    .venv/bin/python -m bench.wsupstream --port 8001

`/v1/realtime?model=...&events=N&interval_ms=M` (N=60, M=100 by default): `session.created` at once; then
for each `response.create` the client sends, `response.created`, N `response.output_text.delta` events M ms
apart and `response.done` with usage, as a Realtime generation goes, so brownout parses each session into
generations as it does the real API's. Each delta carries `"i"` (its index) and `"t"` (its send time,
Unix seconds): the client's lateness is its receive time minus that stamp (same machine, same clock).
Deltas are paced from one start, so a late send does not push the ones after it. Any other request
(`GET /ping`) answers 200, so the bench can see the server is up.

The `websockets` server rather than the demo upstream: the demo's mock answers one generation like the real
API (a few deltas, no stamps), and this one has to carry thousands of stamped events a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

__all__ = ["main"]


def _params(path: str) -> tuple[str, int, float]:
    query = parse_qs(urlsplit(path).query)
    model = query.get("model", ["gpt-realtime"])[0]
    return model, int(query.get("events", ["60"])[0]), float(query.get("interval_ms", ["100"])[0]) / 1000


def _ping(connection: ServerConnection, request: Request) -> Response | None:
    if request.headers.get("Upgrade", "").lower() == "websocket":
        return None
    return Response(HTTPStatus.OK, "OK", Headers([("Content-Length", "3")]), b"ok\n")


async def _generation(ws: ServerConnection, n: int, events: int, interval_s: float) -> None:
    rid = f"resp_{n}"
    base: dict[str, Any] = {"object": "realtime.response", "id": rid, "output_modalities": ["text"]}
    await ws.send(json.dumps({"type": "response.created", "response": {**base, "status": "in_progress"}}))
    where = {"response_id": rid, "item_id": f"item_{n}", "output_index": 0, "content_index": 0}
    start = time.monotonic()
    for i in range(events):
        await asyncio.sleep(max(0.0, start + i * interval_s - time.monotonic()))
        delta = {"type": "response.output_text.delta", **where, "delta": "word ", "i": i, "t": time.time()}
        await ws.send(json.dumps(delta))
    usage = {"total_tokens": events + 10, "input_tokens": 10, "output_tokens": events}
    done = {**base, "status": "completed", "output": [], "usage": usage}
    await ws.send(json.dumps({"type": "response.done", "response": done}))


async def _session(ws: ServerConnection) -> None:
    model, events, interval_s = _params(ws.request.path if ws.request is not None else "/")
    session = {"type": "realtime", "object": "realtime.session", "id": f"sess_{id(ws)}", "model": model}
    await ws.send(json.dumps({"type": "session.created", "session": session}))
    n = 0
    try:
        async for raw in ws:
            if json.loads(raw).get("type") == "response.create":
                n += 1
                await _generation(ws, n, events, interval_s)
    except ConnectionClosed:
        return


async def _serve(port: int) -> None:
    async with serve(_session, "127.0.0.1", port, process_request=_ping, max_size=None, backlog=2048, compression=None):
        print(f"LISTENING {port}", flush=True)
        await asyncio.Future()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.wsupstream", description=__doc__)
    parser.add_argument("--port", type=int, default=8001)
    asyncio.run(_serve(parser.parse_args(argv).port))


if __name__ == "__main__":
    main()
