"""Bedrock's real errors, exception messages, empty answers and terminal events.

A failed call is its status, `x-amzn-errortype: <Code>:<namespace>` and `{"message": ...}`, which
botocore turns into a `ClientError` with that code (after its retries, for throttling and 5xx codes).
Mid-stream, the error is an event-stream message with `:message-type: exception` and an
`:exception-type` (lower camel case: `throttlingException`), which botocore raises as an
`EventStreamError` while the caller iterates, outside its retry loop.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire import anthropic_faults
from brownout.core.wire.common import JSON_HEADERS
from brownout.core.wire.eventstream import encode
from brownout.core.wire.jsonutil import dumps, retry_after_header

__all__ = ["EVENTSTREAM_HEADERS", "empty_response", "error_response", "event", "exception_message", "terminal_message"]

EVENTSTREAM_HEADERS = {"content-type": "application/vnd.amazon.eventstream"}
_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"

# Code -> (status, message) as Bedrock Runtime sends them.
_ERRORS: dict[str, tuple[int, str]] = {
    "ValidationException": (400, "Malformed input request, please reformat your input and try again."),
    "ServiceQuotaExceededException": (400, "Your request exceeded the service quota for your account."),
    "AccessDeniedException": (403, "You don't have access to the model with the specified model ID."),
    "ResourceNotFoundException": (404, "Could not resolve the foundation model from the provided model identifier."),
    "ModelTimeoutException": (408, "Model has timed out in processing the request. Try your request again."),
    "ModelErrorException": (424, "The model returned an error. Try your request again."),
    "ModelStreamErrorException": (424, "The model stream returned an error. Try your request again."),
    "ThrottlingException": (429, "Too many requests, please wait before trying again."),
    "ModelNotReadyException": (429, "Model is not ready to serve inference requests. The AWS SDK will automatically "
                                     "retry the operation up to 5 times."),
    "InternalServerException": (500, "The system encountered an unexpected error during processing. "
                                     "Try your request again."),
    "ServiceUnavailableException": (503, "Bedrock is unable to process your request."),
}  # fmt: skip
_BY_STATUS = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
              408: "ModelTimeoutException", 424: "ModelErrorException", 429: "ThrottlingException",
              500: "InternalServerException", 503: "ServiceUnavailableException"}  # fmt: skip
# What a config may call a code besides its own name (other providers' words for the same failure).
_ALIASES = {"context_length_exceeded": ("ValidationException", "Input is too long for requested model."),
            "rate_limit_exceeded": ("ThrottlingException", None), "overloaded": ("ServiceUnavailableException", None)}  # fmt: skip
# The exceptions a stream can carry, by the status the same failure has outside a stream.
_STREAM_BY_STATUS = {400: "validationException", 408: "modelTimeoutException", 424: "modelStreamErrorException",
                     429: "throttlingException", 500: "internalServerException", 503: "serviceUnavailableException"}  # fmt: skip


def _code(status: int, error_type: str | None) -> tuple[str, str]:
    """(code in Pascal case, its usual message) for a status and an optional error_type."""
    if error_type in _ALIASES:
        code, text = _ALIASES[error_type]
        return code, text or _ERRORS[code][1]
    if error_type:
        code = error_type[:1].upper() + error_type[1:]
        return code, _ERRORS.get(code, (status, "The request failed."))[1]
    code = _BY_STATUS.get(status, "InternalServerException" if status >= 500 else "ValidationException")
    return code, _ERRORS[code][1]


def _request_id() -> str:
    return str(uuid.uuid4())


def error_response(
    status: int, error_type: str | None, message: str | None, retry_after_s: float | None
) -> tuple[int, dict[str, str], bytes]:
    code, text = _code(status, error_type)
    headers = dict(JSON_HEADERS)
    headers["x-amzn-requestid"] = _request_id()
    headers["x-amzn-errortype"] = f"{code}:{_NAMESPACE}"
    if retry_after_s is not None:  # Bedrock sends none; a config that asks for one gets it
        headers["retry-after"] = retry_after_header(retry_after_s)
    return status, headers, dumps({"message": message or text}).encode()


def event(name: str, payload: dict[str, Any]) -> bytes:
    """One event message as Bedrock sends it."""
    headers = {":event-type": name, ":content-type": "application/json", ":message-type": "event"}
    return encode(headers, dumps(payload).encode())


def _chunk(inner: dict[str, Any]) -> bytes:
    return event("chunk", {"bytes": base64.b64encode(dumps(inner).encode()).decode("ascii")})


def exception_message(status: int | None, error_type: str | None, message: str | None,
                      exchange: Exchange | None) -> bytes:  # fmt: skip
    """The exception message for `error_type`, else for `status` (None: a model stream error)."""
    if error_type:
        name = _ALIASES[error_type][0] if error_type in _ALIASES else error_type
    else:
        name = _STREAM_BY_STATUS.get(status or 424, "internalServerException" if (status or 0) >= 500
                                     else "validationException")  # fmt: skip
    name = name[:1].lower() + name[1:]
    code = name[:1].upper() + name[1:]
    payload: dict[str, Any] = {"message": message or _code(status or 424, code)[1]}
    if name == "modelStreamErrorException":
        payload.update(originalStatusCode=500, originalMessage="Internal server error")
    headers = {":exception-type": name, ":content-type": "application/json", ":message-type": "exception"}
    return encode(headers, dumps(payload).encode())


def _invoke(exchange: Exchange | None) -> bool:
    """InvokeModel (Claude's own body) rather than Converse: the wire format noted which API it was."""
    return exchange is not None and str(exchange.notes.get("bedrock_api", "")).startswith("invoke")


def empty_response(exchange: Exchange) -> tuple[dict[str, str], bytes]:
    """A valid answer with no content: Converse's shape, or Claude's inside InvokeModel."""
    base = {"x-amzn-requestid": _request_id()}
    if _invoke(exchange):
        if not exchange.stream:
            headers, body = anthropic_faults.empty_response(exchange)
            return {**headers, **base}, body
        model = exchange.model or "claude"
        start = {"type": "message_start", "message": {"id": "msg_bdrk_empty", "type": "message", "role": "assistant",
                 "model": model, "content": [], "stop_reason": None, "stop_sequence": None,
                 "usage": {"input_tokens": 0, "output_tokens": 1}}}  # fmt: skip
        delta = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                 "usage": {"output_tokens": 0}}  # fmt: skip
        body = _chunk(start) + _chunk(delta) + terminal_message(exchange)
        return {**EVENTSTREAM_HEADERS, **base, "x-amzn-bedrock-content-type": "application/json"}, body
    usage = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}
    if not exchange.stream:
        doc = {"output": {"message": {"role": "assistant", "content": []}}, "stopReason": "end_turn",
               "usage": usage, "metrics": {"latencyMs": 0}}  # fmt: skip
        return {**JSON_HEADERS, **base}, dumps(doc).encode()
    body = (event("messageStart", {"role": "assistant"}) + terminal_message(exchange)
            + event("metadata", {"usage": usage, "metrics": {"latencyMs": 0}}))  # fmt: skip
    return {**EVENTSTREAM_HEADERS, **base}, body


def terminal_message(exchange: Exchange | None) -> bytes:
    """The event that completes a stream: Converse's `messageStop`, or Claude's `message_stop` chunk."""
    if _invoke(exchange):
        metrics = {"inputTokenCount": 0, "outputTokenCount": 0, "invocationLatency": 0, "firstByteLatency": 0}
        return _chunk({"type": "message_stop", "amazon-bedrock-invocationMetrics": metrics})
    return event("messageStop", {"stopReason": "end_turn"})
