"""Behaviour every provider format shares.

`ProviderFormat` is the one boundary where malformed traffic stops: bytes that are not the JSON
the format expects (`MALFORMED`) are recorded as the exchange's `parse_error` with a reason code,
and the public `parse_request` / `parse_response` / `feed` / `finish` go on. Any other exception
is a bug of the parser, not of the traffic: it propagates to the caller's guard, which counts it
as an internal error (and raises it in strict mode). Subclasses implement the `_request` /
`_response` hooks on already-decoded JSON and override the fault-bytes methods with their
provider's shapes; the defaults here are the plain-HTTP ones.
"""

from __future__ import annotations

import json
import logging
from abc import abstractmethod
from typing import Any, ClassVar

from brownout.core.exchange import Exchange
from brownout.core.wire.base import StreamEvent, StreamParser, WireFormat
from brownout.core.wire.jsonutil import (
    TextBuffer,
    decode_capped,
    dumps,
    loads,
    retry_after_header,
)

__all__ = [
    "JSON_HEADERS",
    "MALFORMED",
    "NDJSON_HEADERS",
    "SSE_HEADERS",
    "BaseStreamParser",
    "MalformedBody",
    "ProviderFormat",
    "note_parse_error",
    "parse_error_reason",
]

log = logging.getLogger(__name__)

JSON_HEADERS: dict[str, str] = {"content-type": "application/json"}
SSE_HEADERS: dict[str, str] = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}
NDJSON_HEADERS: dict[str, str] = {"content-type": "application/x-ndjson"}

_DEFAULT_MESSAGES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class MalformedBody(ValueError):
    """A body that decodes as JSON yet breaks its format's framing (e.g. a JSON array cut short)."""


# What malformed traffic raises in a parser; anything else a parser raises is a bug of brownout.
# (UnicodeDecodeError: json.loads of bytes that are not UTF-8. RecursionError: nesting too deep.)
MALFORMED: tuple[type[BaseException], ...] = (json.JSONDecodeError, UnicodeDecodeError, MalformedBody, RecursionError)


def parse_error_reason(exc: BaseException) -> str:
    """The core.exchange.PARSE_ERROR_REASONS code of a MALFORMED exception."""
    return "too_deep" if isinstance(exc, RecursionError) else "invalid_json"


def note_parse_error(exchange: Exchange, where: str, exc: BaseException) -> None:
    """Record the first parse failure only: later ones are usually its consequences."""
    if exchange.parse_error is None:
        exchange.note_parse_error(parse_error_reason(exc), f"{where}: {type(exc).__name__}: {exc}")
        log.debug("wire parse error on %s: %s", exchange.id, exchange.parse_error)


def default_message(status: int) -> str:
    return _DEFAULT_MESSAGES.get(status, f"HTTP {status}")


class BaseStreamParser(StreamParser):
    """Counts events, catches parser exceptions, and collects assistant text under a cap."""

    def __init__(self, exchange: Exchange) -> None:
        super().__init__(exchange)
        self.text = TextBuffer(exchange.capture_max_bytes)
        exchange.streamed = True
        exchange.stream_complete = False

    def feed(self, event: StreamEvent) -> None:
        exchange = self.exchange
        exchange.stream_events += 1
        try:
            self._feed(event)
        except MALFORMED as exc:
            note_parse_error(exchange, "stream", exc)

    def finish(self) -> None:
        try:
            self._finish()
        except MALFORMED as exc:
            note_parse_error(self.exchange, "stream end", exc)
        if self.text:
            self.exchange.output_text = self.text.value()
        self.exchange.cap_captured()

    def _json(self, data: str, what: str = "stream event") -> Any:
        """The event's decoded JSON; None for an empty or undecodable one (recorded as a parse error)."""
        if not data:
            return None
        try:
            return loads(data)
        except MALFORMED as exc:
            note_parse_error(self.exchange, what, exc)
            return None

    @abstractmethod
    def _feed(self, event: StreamEvent) -> None:
        """Account for one event; MALFORMED for bad bytes (recorded by the caller)."""

    def _finish(self) -> None:
        """Materialise reassembled state (tool-call arguments) onto the exchange."""


class ProviderFormat(WireFormat):
    """A wire format with a capped capture and exception-safe parsing entry points."""

    provider: ClassVar[str]

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        try:
            exchange.provider, exchange.gen_ai_provider = self.provider, self.gen_ai_provider
            exchange.request_body = decode_capped(body, exchange.capture_max_bytes)
            if not body or body.isspace():
                return
            self._request(exchange, self._load_request(body))
        except MALFORMED as exc:
            note_parse_error(exchange, "request", exc)
        exchange.cap_captured()

    def _load_request(self, body: bytes) -> Any:
        """Decode a request body; a format whose recognise() decoded it already may reuse that."""
        return loads(body)

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        try:
            if not body or body.isspace():
                return
            self._response(exchange, loads(body))
        except MALFORMED as exc:
            note_parse_error(exchange, "response", exc)
        exchange.cap_captured()

    @abstractmethod
    def _request(self, exchange: Exchange, data: Any) -> None:
        """Fill the exchange from the decoded request JSON; MALFORMED for a body its format rejects."""

    @abstractmethod
    def _response(self, exchange: Exchange, data: Any) -> None:
        """Fill the exchange from the decoded response JSON; MALFORMED for a body its format rejects."""

    # -- provider-accurate fault bytes (plain-HTTP defaults) -------------------------

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """The provider's error body and headers for `status`."""
        headers = dict(JSON_HEADERS)
        if retry_after_s is not None:
            headers["retry-after"] = retry_after_header(retry_after_s)
        body = {"error": {"status": status, "message": message or default_message(status)}}
        if error_type:
            body["error"]["type"] = error_type
        return status, headers, dumps(body).encode()

    def stream_error_event(
        self,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        """The bytes of the provider's mid-stream error."""
        err = {"error": {"type": error_type or "stream_error", "message": message or "stream error"}}
        if exchange is not None and exchange.content_type.startswith("text/event-stream"):
            return b"data: " + dumps(err).encode() + b"\n\n"
        return dumps(err).encode() + b"\n"

    def status_error_event(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        exchange: Exchange | None = None,
    ) -> bytes:
        """The provider's mid-stream error for the failure that outside a stream would have `status`. Most
        providers have one error event whatever the failure (the stream is a 200): the one above."""
        return self.stream_error_event(error_type=error_type, message=message, exchange=exchange)

    def empty_response(self, exchange: Exchange) -> tuple[dict[str, str], bytes]:
        """An empty but valid completion: streamed when the exchange is a stream."""
        return {}, b""

    def terminal_bytes(self, exchange: Exchange | None = None) -> bytes:
        """The bytes of the event that ends a complete stream (b"" when there is none)."""
        return b""
