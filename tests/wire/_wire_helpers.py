"""Shared helpers for the wire-format tests: exchanges, requests and chunked stream feeding."""

from __future__ import annotations

import json
import random
from collections.abc import Hashable
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire import detect
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.edits import ArgumentsEdit
from brownout.core.wire.framing import Framer, NDJSONFramer, SSEFramer

__all__ = ["Tagging", "request", "sse", "stream_through", "tagged"]


def request(
    path: str,
    body: Any = b"",
    *,
    method: str = "POST",
    host: str = "api.example.com",
    headers: dict[str, str] | None = None,
) -> tuple[ProviderFormat, Exchange]:
    """Detect and parse a request the way the proxy addon does; returns the format and exchange."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    path_only, _, query = path.partition("?")
    info = RequestInfo(method=method, host=host, path=path_only, query=query, headers=headers or {}, body=raw)
    fmt, op = detect(info)
    ex = Exchange(id="x1", session="s1", method=method, host=host, path=path)
    ex.provider, ex.operation = fmt.provider, op
    fmt.parse_request(ex, raw)
    return fmt, ex


def sse(*events: Any, event_names: list[str | None] | None = None, sep: str = "\n\n") -> bytes:
    """SSE bytes: dicts are JSON-encoded, strings sent as-is."""
    out = []
    for i, ev in enumerate(events):
        data = ev if isinstance(ev, str) else json.dumps(ev, separators=(",", ":"))
        name = event_names[i] if event_names else None
        out.append((f"event: {name}\n" if name else "") + f"data: {data}{sep}")
    return "".join(out).encode()


def stream_through(
    fmt: ProviderFormat, ex: Exchange, body: bytes, *, ndjson: bool = False, seed: int = 7, framer: Framer | None = None
) -> Exchange:
    """Feed `body` in random-sized chunks through a framer (SSE unless told) and the format's stream parser."""
    framer = framer or (NDJSONFramer() if ndjson else SSEFramer())
    parser = fmt.stream_parser(ex)
    rng = random.Random(seed)
    i = 0
    while i < len(body):
        n = rng.randint(1, 40)
        for event in framer.feed(body[i : i + n]):
            parser.feed(event)
        i += n
    for event in framer.flush():
        parser.feed(event)
    parser.finish()
    return ex


class Tagging(ArgumentsEdit):
    """Marks every place a wire format hands over, by form, and records what it was handed."""

    def __init__(self) -> None:
        self.seen: list[tuple[Any, ...]] = []

    def text(self, arguments: str) -> str:
        self.seen.append(("text", arguments))
        return "T" + arguments

    def value(self, arguments: Any) -> Any:
        self.seen.append(("value", arguments))
        return "V"

    def object(self, arguments: dict[str, Any], tool: str | None) -> bool:
        self.seen.append(("object", dict(arguments), tool))
        arguments["o"] = True
        return True

    def fragment(self, call: Hashable, fragment: str) -> str:
        self.seen.append(("fragment", call, fragment))
        return "F" + fragment

    def repeat(self, call: Hashable, arguments: str) -> str:
        self.seen.append(("repeat", call, arguments))
        return "R" + arguments


def tagged(old: str) -> str:
    """A text edit whose result shows what it was given."""
    return f"<{old}>"
