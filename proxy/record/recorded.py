"""One recorded exchange, as a cassette line holds it: the request, upstream's answer, its timing.

`Recorded.from_dict` trusts nothing in the line (a cassette may come from anywhere): every time offset
must be a number from 0 to `MAX_OFFSET_S` (replay waits that long), every status an HTTP status.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EVENT_OVERHEAD",
    "MAX_OFFSET_S",
    "Event",
    "Recorded",
    "WsClose",
    "WsMessage",
    "decode_bytes",
    "encode_bytes",
]

# The longest time offset a cassette may give (seconds from the request): a day.
MAX_OFFSET_S = 86_400.0


def encode_bytes(data: bytes) -> dict[str, str]:
    """`{"text": ...}` for UTF-8, else `{"b64": ...}`: readable in a diff, exact either way."""
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(data).decode("ascii")}


def decode_bytes(value: Any) -> bytes:
    if not isinstance(value, dict):
        raise ValueError(f"expected {{'text': ...}} or {{'b64': ...}}, got {type(value).__name__}")
    if "text" in value:
        return str(value["text"]).encode("utf-8")
    return base64.b64decode(str(value.get("b64", "")), validate=True)


# What holding one recorded event costs besides its bytes (the object, its bytes header, the list
# slot): a stream of tiny events is bounded by what it costs, not by its bytes alone.
EVENT_OVERHEAD = 96


@dataclass(slots=True)
class Event:
    """One SSE event, NDJSON line or body chunk, and when it arrived."""

    t: float  # seconds from the request going upstream
    data: bytes

    def to_dict(self) -> dict[str, Any]:
        return {"t": round(self.t, 6), **encode_bytes(self.data)}


@dataclass(slots=True)
class WsMessage:
    """One message of a recorded WebSocket session, either way, and when it crossed."""

    t: float  # seconds from the upgrade request
    from_client: bool
    data: bytes
    binary: bool = False

    def to_dict(self) -> dict[str, Any]:
        # A binary frame of UTF-8 (Gemini Live sends its JSON so) stays readable: text, marked binary.
        out: dict[str, Any] = {"t": round(self.t, 6), "from": "client" if self.from_client else "server"}
        out.update(encode_bytes(self.data))
        if self.binary:
            out["binary"] = True
        return out

    @classmethod
    def from_dict(cls, d: Any, name: str) -> WsMessage:
        if not isinstance(d, dict) or d.get("from") not in ("client", "server"):
            raise ValueError(f"{name}: a message needs from: client or server")
        return cls(_offset(d.get("t"), f"{name}.t"), d["from"] == "client", decode_bytes(d), bool(d.get("binary")))


@dataclass(slots=True)
class WsClose:
    """How a recorded WebSocket session ended."""

    code: int | None
    reason: str = ""
    by: str | None = None  # client, server or brownout

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "reason": self.reason, "by": self.by}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> WsClose:
        code, by = d.get("code"), d.get("by")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int) or not 1000 <= code <= 4999):
            raise ValueError(f"response.close.code: {code!r} is not a WebSocket close code")
        if by not in (None, "client", "server", "brownout"):
            raise ValueError(f"response.close.by: {by!r} is not client, server or brownout")
        return cls(code, str(d.get("reason") or ""), by)


@dataclass(slots=True)
class Recorded:
    """One recorded exchange: the request as it went upstream (secrets removed), the answer as upstream sent it."""

    session: str
    seq: int
    method: str
    url: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status: int | None = None  # None: upstream never answered (`error` says why)
    reason: str = ""
    http_version: str = "HTTP/1.1"
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    headers_s: float = 0.0  # response headers arrived, seconds from the request going upstream
    end_s: float = 0.0  # response complete
    body: bytes | None = None  # a buffered response
    events: list[Event] | None = None  # a streamed one
    messages: list[WsMessage] | None = None  # a WebSocket session (status 101): every message, both ways
    close: WsClose | None = None  # how that session ended
    error: str | None = None  # the upstream failed (no answer, or cut mid-body)
    truncated: bool = False  # longer than record.max_body_bytes: kept cut
    decoded: str | None = None  # the content-encoding removed from the recorded body
    recorded_at: float = 0.0
    provider: str = "http"
    operation: str = "http"
    model: str | None = None
    source: str = ""  # file:line it was read from

    @property
    def body_size(self) -> int:
        if self.messages is not None:
            return sum(len(m.data) for m in self.messages)
        if self.events is not None:
            return sum(len(e.data) for e in self.events)
        return len(self.body or b"")

    @property
    def held_bytes(self) -> int:
        """Memory the recorded bodies hold, about: their bytes plus each event's overhead."""
        items = self.events if self.events is not None else self.messages
        events = len(items) * EVENT_OVERHEAD if items is not None else 0
        return len(self.request_body) + self.body_size + events

    def to_dict(self) -> dict[str, Any]:
        response: dict[str, Any] | None = None
        if self.status is not None:
            response = {
                "status": self.status,
                "reason": self.reason,
                "http_version": self.http_version,
                "headers": [list(h) for h in self.response_headers],
                "headers_s": round(self.headers_s, 6),
                "end_s": round(self.end_s, 6),
            }
            if self.messages is not None:
                response["messages"] = [m.to_dict() for m in self.messages]
                if self.close is not None:
                    response["close"] = self.close.to_dict()
            elif self.events is not None:
                response["events"] = [e.to_dict() for e in self.events]
            else:
                response["body"] = encode_bytes(self.body or b"")
            if self.decoded:
                response["decoded"] = self.decoded
            if self.truncated:
                response["truncated"] = True
        return {
            "seq": self.seq,
            "session": self.session,
            "recorded_at": round(self.recorded_at, 6),
            "provider": self.provider,
            "operation": self.operation,
            "model": self.model,
            "request": {
                "method": self.method,
                "url": self.url,
                "headers": [list(h) for h in self.request_headers],
                "body": encode_bytes(self.request_body),
            },
            "response": response,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], source: str = "") -> Recorded:
        """ValueError, KeyError or TypeError (naming the field) for what no recording holds."""
        req = d["request"]
        resp = d.get("response")
        recorded_at = float(d.get("recorded_at", 0.0))
        if not math.isfinite(recorded_at) or recorded_at < 0:
            raise ValueError(f"recorded_at: {recorded_at!r} is not a time")
        rec = cls(
            session=str(d["session"]),
            seq=int(d.get("seq", 0)),
            method=str(req["method"]),
            url=str(req["url"]),
            request_headers=[(str(k), str(v)) for k, v in req.get("headers", [])],
            request_body=decode_bytes(req.get("body", {"text": ""})),
            error=d.get("error"),
            recorded_at=recorded_at,
            provider=str(d.get("provider", "http")),
            operation=str(d.get("operation", "http")),
            model=d.get("model"),
            source=source,
        )
        if resp is not None:
            rec.status = int(resp["status"])
            if not 100 <= rec.status <= 999:
                raise ValueError(f"response.status: {resp['status']!r} is not an HTTP status")
            rec.reason = str(resp.get("reason", ""))
            rec.http_version = str(resp.get("http_version", "HTTP/1.1"))
            rec.response_headers = [(str(k), str(v)) for k, v in resp.get("headers", [])]
            rec.headers_s = _offset(resp.get("headers_s", 0.0), "response.headers_s")
            rec.end_s = _offset(resp.get("end_s", rec.headers_s), "response.end_s")
            rec.decoded = resp.get("decoded")
            rec.truncated = bool(resp.get("truncated", False))
            if "messages" in resp:
                rec.messages = [
                    WsMessage.from_dict(m, f"response.messages[{i}]") for i, m in enumerate(resp["messages"])
                ]
                if isinstance(resp.get("close"), dict):
                    rec.close = WsClose.from_dict(resp["close"])
            elif "events" in resp:
                rec.events = [
                    Event(_offset(e["t"], f"response.events[{i}].t"), decode_bytes(e))
                    for i, e in enumerate(resp["events"])
                ]
            else:
                rec.body = decode_bytes(resp.get("body", {"text": ""}))
        return rec


def _offset(value: Any, name: str) -> float:
    """A time offset in seconds: a number from 0 to MAX_OFFSET_S (NaN, infinity, 1e9 are not)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}: {value!r} is not a number of seconds")
    if not 0.0 <= value <= MAX_OFFSET_S:  # false for NaN too
        raise ValueError(f"{name}: {value!r} s is not a time offset from 0 to {MAX_OFFSET_S:g} s")
    return float(value)
