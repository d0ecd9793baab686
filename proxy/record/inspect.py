"""What a recording holds, read through the wire formats: provider, model, tools, sizes, timing."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from brownout.core.exchange import Exchange, Timings
from brownout.core.secret_paths import redact_target
from brownout.core.wire import BUILTIN, WireFormats
from brownout.core.wire.framing import framer_for
from brownout.core.wire.realtime import RealtimeFormat
from brownout.proxy.record.cassette import Cassette, CassetteFile, Recorded
from brownout.proxy.record.matcher import recorded_info

__all__ = ["ExchangeView", "describe", "exchange_of", "exchanges_of", "session_summary", "totals"]


@dataclass(slots=True)
class ExchangeView:
    """One recorded exchange as `brownout cassette show` prints it."""

    seq: int
    method: str
    url: str
    status: int | None
    provider: str
    operation: str
    model: str | None
    tool: str | None  # the tool this exchange executes (MCP tools/call, a tool API)
    tool_calls: list[str] = field(default_factory=list)  # tools the model asked for in its answer
    events: int | None = None  # streamed: recorded events (a WebSocket session: its messages)
    request_bytes: int = 0
    response_bytes: int = 0
    duration_s: float = 0.0
    error: str | None = None
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


def exchange_of(rec: Recorded, formats: WireFormats = BUILTIN) -> Exchange:
    """A recorded exchange read back through its wire format, as the proxy saw it when it was recorded."""
    return exchanges_of(rec, formats)[0]


def exchanges_of(rec: Recorded, formats: WireFormats = BUILTIN) -> list[Exchange]:
    """The exchanges a recording stands for: one, or a realtime session and then each of its generations,
    its messages read back through the session's codec as the proxy read them live."""
    info = recorded_info(rec)
    wire, operation = formats.detect(info)
    url = urlsplit(rec.url)
    ex = Exchange(
        id=str(rec.seq),
        session=rec.session,
        method=rec.method,
        scheme=url.scheme or "http",
        host=info.host,
        port=url.port or (443 if url.scheme == "https" else 80),
        path=redact_target(url.path + (f"?{url.query}" if url.query else "")),  # a cassette older than its redaction
        operation=operation,
    )
    wire.parse_request(ex, rec.request_body)
    ex.status = rec.status
    ex.response_headers = {k.lower(): v for k, v in rec.response_headers}
    ex.timings = Timings(start=rec.recorded_at, first_upstream_byte=rec.recorded_at + rec.headers_s)
    ex.timings.end = rec.recorded_at + rec.end_s
    ex.request_bytes, ex.response_bytes = len(rec.request_body), rec.body_size
    if rec.error is not None:
        ex.error_type, ex.error_message = ex.error_type or "connection", rec.error
    ex.content_type = next((v for k, v in rec.response_headers if k.lower() == "content-type"), "")
    if rec.events is not None:
        parser = wire.stream_parser(ex)
        framer = framer_for(ex.content_type)
        if framer is not None:
            for event in framer.feed(b"".join(e.data for e in rec.events)) + framer.flush():
                parser.feed(event)
        parser.finish()
    elif rec.body:
        wire.parse_response(ex, rec.body)
    if rec.messages is not None and isinstance(wire, RealtimeFormat):
        return [ex, *_generations(rec, wire, ex)]
    return [ex]


def _generations(rec: Recorded, wire: RealtimeFormat, session: Exchange) -> list[Exchange]:
    now = [rec.recorded_at]  # the codec's clock: the time of the message it reads
    codec = wire.codec(session, lambda: now[0])
    for message in rec.messages or ():
        now[0] = rec.recorded_at + message.t
        event = codec.observe("client" if message.from_client else "server", message.data, not message.binary)
        codec.deliver(event, now[0])
    codec.close(session.timings.end or now[0])
    if rec.close is not None:
        codec.info.close_code, codec.info.closed_by = rec.close.code, rec.close.by
    return codec.drain()


def describe(rec: Recorded, formats: WireFormats = BUILTIN) -> ExchangeView:
    exchanges = exchanges_of(rec, formats)  # a realtime session: its tool calls are its generations'
    ex = exchanges[0]
    items = rec.events if rec.events is not None else rec.messages
    return ExchangeView(
        seq=rec.seq,
        method=rec.method,
        url=rec.url,
        status=rec.status,
        provider=ex.provider,
        operation=ex.operation,
        model=ex.model,
        tool=ex.tool_name,
        tool_calls=[c.name for e in exchanges for c in e.tool_calls] if ex.tool_name is None else [],
        events=len(items) if items is not None else None,
        request_bytes=len(rec.request_body),
        response_bytes=rec.body_size,
        duration_s=rec.end_s,
        error=rec.error,
        truncated=rec.truncated,
    )


def session_summary(cassette: Cassette | CassetteFile, views: list[ExchangeView]) -> dict[str, Any]:
    return {
        "file": cassette.path.name,
        "session": cassette.session,
        "created": cassette.created,
        "exchanges": len(views),
        "bytes": cassette.size,
        "providers": dict(Counter(v.provider for v in views)),
    }


def totals(views: list[ExchangeView]) -> list[dict[str, Any]]:
    """Exchanges per (provider, model, tool), most first."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for v in views:
        tools = [v.tool] if v.tool else v.tool_calls or [""]
        for tool in tools:
            counts[(v.provider, v.model or "", tool)] += 1
    return [
        {"provider": p, "model": m, "tool": t, "exchanges": n}
        for (p, m, t), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
