"""Anthropic's real error bodies, rate-limit headers, error events and empty messages."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.common import JSON_HEADERS, SSE_HEADERS
from brownout.core.wire.jsonutil import dumps, new_id, retry_after_header

__all__ = ["MESSAGE_STOP", "empty_response", "error_response", "stream_error_event"]

MESSAGE_STOP = b'event: message_stop\ndata: {"type":"message_stop"}\n\n'

# status -> (error type, message) as the API sends them
_BY_STATUS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use the specified resource."),
    404: ("not_found_error", "Not found"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: (
        "rate_limit_error",
        "This request would exceed the rate limit for your organization of 50 requests per minute. "
        "For details, refer to: https://docs.claude.com/en/api/rate-limits. You can see the response headers "
        "for current usage. Please reduce the number of requests or try again later.",
    ),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}
# error_type aliases a fault config may use -> (type, message)
_BY_TYPE: dict[str, tuple[str, str]] = {
    "context_length_exceeded": ("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum"),
    **{etype: (etype, msg) for etype, msg in _BY_STATUS.values()},
}


def _error(status: int, error_type: str | None, message: str | None) -> dict[str, str]:
    etype, default = _BY_TYPE.get(error_type or "") or _BY_STATUS.get(
        status, ("api_error" if status >= 500 else "invalid_request_error", "Internal server error")
    )
    if error_type and error_type not in _BY_TYPE:
        etype = error_type
    return {"type": etype, "message": message or default}


def _rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def error_response(
    status: int, error_type: str | None, message: str | None, retry_after_s: float | None
) -> tuple[int, dict[str, str], bytes]:
    request_id = new_id("req_011C", 20)
    body = {"type": "error", "error": _error(status, error_type, message), "request_id": request_id}
    headers = dict(JSON_HEADERS)
    headers["request-id"] = request_id
    if status == 429:
        wait = 1.0 if retry_after_s is None else max(0.0, retry_after_s)
        reset = _rfc3339(time.time() + wait)
        headers.update(
            {
                "retry-after": retry_after_header(wait),
                "anthropic-ratelimit-requests-limit": "50",
                "anthropic-ratelimit-requests-remaining": "0",
                "anthropic-ratelimit-requests-reset": reset,
                "anthropic-ratelimit-input-tokens-limit": "30000",
                "anthropic-ratelimit-input-tokens-remaining": "30000",
                "anthropic-ratelimit-input-tokens-reset": reset,
                "anthropic-ratelimit-output-tokens-limit": "8000",
                "anthropic-ratelimit-output-tokens-remaining": "8000",
                "anthropic-ratelimit-output-tokens-reset": reset,
            }
        )
    elif retry_after_s is not None:
        headers["retry-after"] = retry_after_header(retry_after_s)
    return status, headers, dumps(body).encode()


def stream_error_event(error_type: str | None, message: str | None) -> bytes:
    err = _error(529, error_type, message)  # overloaded_error is the real-world mid-stream failure
    return b"event: error\ndata: " + dumps({"type": "error", "error": err}).encode() + b"\n\n"


def _sse(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: ".encode() + dumps(payload).encode() + b"\n\n"


def empty_response(exchange: Exchange) -> tuple[dict[str, str], bytes]:
    message: dict[str, Any] = {
        "id": new_id("msg_01", 22),
        "type": "message",
        "role": "assistant",
        "model": exchange.model or "claude-sonnet-4-5",
        "content": [],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
    }
    if not exchange.stream:
        return dict(JSON_HEADERS), dumps(message).encode()
    start = dict(message, stop_reason=None, usage={"input_tokens": 0, "output_tokens": 1})
    body = (
        _sse("message_start", {"type": "message_start", "message": start})
        + _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 0},
            },
        )
        + MESSAGE_STOP
    )
    return dict(SSE_HEADERS), body
