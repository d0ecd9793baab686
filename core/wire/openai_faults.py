"""OpenAI's real error bodies, rate-limit headers, error events and empty completions."""

from __future__ import annotations

import time
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.common import JSON_HEADERS, SSE_HEADERS
from brownout.core.wire.jsonutil import dumps, go_duration, new_id, retry_after_header

__all__ = ["empty_response", "error_response", "responses_completed_event", "stream_error_event"]

_HELP = "You can retry your request, or contact us through our help center at help.openai.com if the error persists."

# error_type -> (status it belongs to, type, code, param, message template)
_KNOWN: dict[str, tuple[int, str, str | None, str | None, str]] = {
    "rate_limit_exceeded": (
        429,
        "requests",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for {model} in organization org-brownout on requests per min (RPM): "
        "Limit 500, Used 500, Requested 1. Please try again in {wait}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
    ),
    "tokens": (
        429,
        "tokens",
        "rate_limit_exceeded",
        None,
        "Rate limit reached for {model} in organization org-brownout on tokens per min (TPM): "
        "Limit 30000, Used 29800, Requested 1200. Please try again in {wait}. "
        "Visit https://platform.openai.com/account/rate-limits to learn more.",
    ),
    "insufficient_quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        None,
        "You exceeded your current quota, please check your plan and billing details. For more information "
        "on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
    ),
    "context_length_exceeded": (
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "messages",
        "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 "
        "tokens. Please reduce the length of the messages.",
    ),
    "invalid_api_key": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        None,
        "Incorrect API key provided: sk-proj-****brwn. You can find your API key at "
        "https://platform.openai.com/account/api-keys.",
    ),
    "model_not_found": (
        404,
        "invalid_request_error",
        "model_not_found",
        None,
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "server_error": (
        500,
        "server_error",
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that! "
        + _HELP
        + " (Please include the request ID {request_id} in your message.)",
    ),
    "cf_bad_gateway": (502, "cf_bad_gateway", None, None, "Bad gateway."),
    "server_is_overloaded": (
        503,
        "server_error",
        "server_is_overloaded",
        None,
        "That model is currently overloaded with other requests. "
        + _HELP
        + " (Please include the request ID {request_id} in your message.)",
    ),
}
_BY_STATUS = {
    400: "context_length_exceeded", 401: "invalid_api_key", 404: "model_not_found", 429: "rate_limit_exceeded",
    500: "server_error", 502: "cf_bad_gateway", 503: "server_is_overloaded",
}  # fmt: skip
_TYPE_BY_STATUS = {400: "invalid_request_error", 401: "invalid_request_error", 403: "invalid_request_error",
                   404: "invalid_request_error", 409: "invalid_request_error", 422: "invalid_request_error",
                   429: "requests"}  # fmt: skip


def _model(exchange: Exchange | None) -> str:
    return (exchange.model if exchange is not None else None) or "gpt-4o"


def error_body(status: int, error_type: str | None, message: str | None, wait_s: float, request_id: str,
               exchange: Exchange | None) -> dict[str, Any]:  # fmt: skip
    known = _KNOWN.get(error_type or _BY_STATUS.get(status, ""))
    if known is not None:
        _, etype, code, param, template = known
    else:
        # An unknown error_type becomes the code, with the type family of the status.
        etype = _TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")
        code, param, template = error_type, None, "The server returned an error ({status})."
    text = message or template.format(model=_model(exchange), wait=go_duration(wait_s), request_id=request_id,
                                      status=status)  # fmt: skip
    code_value: Any = status if etype == "cf_bad_gateway" else code  # Cloudflare's 502 body has a numeric code
    return {"error": {"message": text, "type": etype, "param": param, "code": code_value}}


def error_response(
    status: int,
    error_type: str | None,
    message: str | None,
    retry_after_s: float | None,
    exchange: Exchange | None,
) -> tuple[int, dict[str, str], bytes]:
    request_id = new_id("req_", 32)
    wait = 1.0 if retry_after_s is None else max(0.0, retry_after_s)
    body = error_body(status, error_type, message, wait, request_id, exchange)
    headers = dict(JSON_HEADERS)
    headers["x-request-id"] = request_id
    err = body["error"]
    if status == 429 and err["type"] != "insufficient_quota":
        # Exhausted-quota 429s are not time-limited, so real ones carry no retry hints.
        tokens = err["type"] == "tokens"
        headers.update(
            {
                "retry-after": retry_after_header(wait),
                "retry-after-ms": str(round(wait * 1000)),
                "x-ratelimit-limit-requests": "500",
                "x-ratelimit-remaining-requests": "499" if tokens else "0",
                "x-ratelimit-reset-requests": go_duration(0.12 if tokens else wait),
                "x-ratelimit-limit-tokens": "30000",
                "x-ratelimit-remaining-tokens": "0" if tokens else "29800",
                "x-ratelimit-reset-tokens": go_duration(wait if tokens else 0.4),
            }
        )
    elif retry_after_s is not None:
        headers["retry-after"] = retry_after_header(wait)
        headers["retry-after-ms"] = str(round(wait * 1000))
    return status, headers, dumps(body).encode()


def stream_error_event(error_type: str | None, message: str | None, exchange: Exchange | None) -> bytes:
    request_id = new_id("req_", 32)
    status = _KNOWN[error_type][0] if error_type in _KNOWN else 500
    err = error_body(status, error_type or "server_error", message, 1.0, request_id, exchange)["error"]
    if exchange is not None and exchange.operation == "responses":
        # The Responses API reports it as a typed `error` event (openai.types.responses.ResponseErrorEvent).
        ev = {"type": "error", "code": err["code"], "message": err["message"], "param": err["param"],
              "sequence_number": exchange.stream_events}  # fmt: skip
        return b"event: error\ndata: " + dumps(ev).encode() + b"\n\n"
    # Chat streams: a chunk with an `error` key, which openai-python turns into APIError.
    return b"data: " + dumps({"error": err}).encode() + b"\n\n"


def _response_object(exchange: Exchange, rid: str, status: str) -> dict[str, Any]:
    return {
        "id": rid, "object": "response", "created_at": int(time.time()), "status": status, "error": None,
        "incomplete_details": None, "instructions": None, "max_output_tokens": None, "model": _model(exchange),
        "output": [], "parallel_tool_calls": True, "previous_response_id": None, "temperature": 1.0,
        "text": {"format": {"type": "text"}}, "tool_choice": "auto", "tools": [], "top_p": 1.0,
        "truncation": "disabled", "metadata": {},
        "usage": None if status != "completed" else {
            "input_tokens": 0, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 0,
            "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 0},
    }  # fmt: skip


def _sse(kind: str, payload: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: ".encode() + dumps(payload).encode() + b"\n\n"


def responses_completed_event(exchange: Exchange) -> bytes:
    rid = exchange.response_id or new_id("resp_", 48)
    ev = {"type": "response.completed", "sequence_number": exchange.stream_events,
          "response": _response_object(exchange, rid, "completed")}  # fmt: skip
    return _sse("response.completed", ev)


def empty_response(exchange: Exchange) -> tuple[dict[str, str], bytes]:
    op, model, now = exchange.operation, _model(exchange), int(time.time())
    if op == "embeddings":
        body: dict[str, Any] = {
            "object": "list",
            "data": [],
            "model": model,
            "usage": {"prompt_tokens": 0, "total_tokens": 0},
        }
        return dict(JSON_HEADERS), dumps(body).encode()
    if op == "responses":
        rid = new_id("resp_", 48)
        if not exchange.stream:
            return dict(JSON_HEADERS), dumps(_response_object(exchange, rid, "completed")).encode()
        created = {"type": "response.created", "sequence_number": 0,
                   "response": _response_object(exchange, rid, "in_progress")}  # fmt: skip
        done = {"type": "response.completed", "sequence_number": 1,
                "response": _response_object(exchange, rid, "completed")}  # fmt: skip
        return dict(SSE_HEADERS), _sse("response.created", created) + _sse("response.completed", done)
    usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    legacy = op == "text_completion"
    cid = new_id("cmpl-" if legacy else "chatcmpl-", 29)
    if not exchange.stream:
        choice: dict[str, Any] = (
            {"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"} if legacy else
            {"index": 0, "message": {"role": "assistant", "content": "", "refusal": None},
             "logprobs": None, "finish_reason": "stop"}
        )  # fmt: skip
        body = {"id": cid, "object": "text_completion" if legacy else "chat.completion", "created": now,
                "model": model, "choices": [choice], "usage": usage}  # fmt: skip
        return dict(JSON_HEADERS), dumps(body).encode()
    obj = "text_completion" if legacy else "chat.completion.chunk"

    def chunk(choice: dict[str, Any], use: Any = None, with_usage: bool = False) -> bytes:
        c: dict[str, Any] = {"id": cid, "object": obj, "created": now, "model": model}
        c["choices"] = [choice] if choice else []
        if with_usage:
            c["usage"] = use
        return b"data: " + dumps(c).encode() + b"\n\n"

    include_usage = bool(exchange.notes.get("openai_include_usage"))
    if legacy:
        out = chunk({"text": "", "index": 0, "logprobs": None, "finish_reason": "stop"}, None, include_usage)
    else:
        out = chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                     "finish_reason": None}, None, include_usage)  # fmt: skip
        out += chunk({"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}, None, include_usage)
    if include_usage:
        out += chunk({}, usage, True)
    return dict(SSE_HEADERS), out + b"data: [DONE]\n\n"
