"""OpenAI fault bytes fed to the real openai SDK: it must raise and parse exactly as for the real API."""

from __future__ import annotations

import json

import httpx2
import openai
import pytest

from brownout.core.wire import by_provider
from brownout.core.wire.framing import SSEFramer
from tests.wire._wire_helpers import request

WIRE = by_provider("openai")
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def client_for(status: int, headers: dict[str, str], body: bytes) -> openai.OpenAI:
    def handler(req: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, headers=headers, content=body)

    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://upstream.test/v1",
        max_retries=0,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


def raised(status: int, error_type: str | None = None, retry_after_s: float | None = None) -> openai.APIStatusError:
    _, ex = request("/v1/chat/completions", CHAT)
    st, headers, body = WIRE.error_response(status, error_type, retry_after_s=retry_after_s, exchange=ex)
    assert st == status and headers["content-type"] == "application/json"
    with pytest.raises(openai.APIStatusError) as info:
        client_for(st, headers, body).chat.completions.create(**CHAT)  # type: ignore[call-overload]
    return info.value


def test_rate_limit_429() -> None:
    exc = raised(429, retry_after_s=2.5)
    assert isinstance(exc, openai.RateLimitError)
    assert exc.code == "rate_limit_exceeded" and exc.type == "requests" and exc.param is None
    h = exc.response.headers
    assert h["retry-after"] == "3" and h["retry-after-ms"] == "2500"
    assert h["x-ratelimit-remaining-requests"] == "0" and h["x-ratelimit-reset-requests"] == "2.5s"
    for name in (
        "x-ratelimit-limit-requests",
        "x-ratelimit-limit-tokens",
        "x-ratelimit-remaining-tokens",
        "x-ratelimit-reset-tokens",
    ):
        assert name in h
    assert h["x-request-id"].startswith("req_") and exc.request_id == h["x-request-id"]
    # The SDK's own retry-after parser reads our headers as the intended delay.
    client = client_for(200, {}, b"")
    assert client._parse_retry_after_header(exc.response.headers) == pytest.approx(2.5)


def test_insufficient_quota_429() -> None:
    exc = raised(429, "insufficient_quota")
    assert isinstance(exc, openai.RateLimitError)
    assert exc.code == "insufficient_quota" and exc.type == "insufficient_quota"


@pytest.mark.parametrize(
    ("status", "error_type", "cls", "code", "etype"),
    [
        (500, None, openai.InternalServerError, "server_error", "server_error"),
        (503, None, openai.InternalServerError, "server_is_overloaded", "server_error"),
        (502, None, openai.InternalServerError, "502", "cf_bad_gateway"),
        (400, None, openai.BadRequestError, "context_length_exceeded", "invalid_request_error"),
        (400, "context_length_exceeded", openai.BadRequestError, "context_length_exceeded", "invalid_request_error"),
        (401, None, openai.AuthenticationError, "invalid_api_key", "invalid_request_error"),
        (404, None, openai.NotFoundError, "model_not_found", "invalid_request_error"),
        (409, "conflict_thing", openai.ConflictError, "conflict_thing", "invalid_request_error"),
    ],
)
def test_status_errors(status: int, error_type: str | None, cls: type, code: str, etype: str) -> None:
    exc = raised(status, error_type)
    assert isinstance(exc, cls)
    assert exc.code == code and exc.type == etype
    if code == "context_length_exceeded":
        assert exc.param == "messages"


def test_overloaded_message_and_body_shape() -> None:
    _, headers, body = WIRE.error_response(503)
    err = json.loads(body)["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"].startswith("That model is currently overloaded with other requests.")
    assert "retry-after" not in headers
    _, headers, _ = WIRE.error_response(503, retry_after_s=4)
    assert headers["retry-after"] == "4" and headers["retry-after-ms"] == "4000"


CHUNK = b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}\n\n'


def test_stream_error_event_raises_api_error() -> None:
    _, ex = request("/v1/chat/completions", dict(CHAT, stream=True))
    body = CHUNK + WIRE.stream_error_event("server_error", "The server had an error", exchange=ex)
    client = client_for(200, {"content-type": "text/event-stream"}, body)
    got: list[str] = []
    with pytest.raises(openai.APIError) as info:
        for chunk in client.chat.completions.create(**dict(CHAT, stream=True)):  # type: ignore[call-overload]
            got.append(chunk.choices[0].delta.content or "")
    assert got == ["Hel"]
    assert info.value.message == "The server had an error" and info.value.code == "server_error"


def test_stream_error_event_is_parsed_back_by_the_wire_parser() -> None:
    _, ex = request("/v1/chat/completions", dict(CHAT, stream=True))
    parser = WIRE.stream_parser(ex)
    for ev in SSEFramer().feed(WIRE.stream_error_event(exchange=ex)):
        parser.feed(ev)
    parser.finish()
    assert ex.error_type == "server_error"


def test_responses_stream_error_event_is_a_typed_error_event() -> None:
    body = {"model": "gpt-4.1", "input": "hi", "stream": True}
    _, ex = request("/v1/responses", body)
    headers, empty = WIRE.empty_response(ex)
    created = empty.split(b"\n\n")[0] + b"\n\n"
    stream = created + WIRE.stream_error_event("server_error", "boom", exchange=ex)
    client = client_for(200, headers, stream)
    events = list(client.responses.create(**body))  # type: ignore[call-overload]
    assert [e.type for e in events] == ["response.created", "error"]
    assert events[-1].code == "server_error" and events[-1].message == "boom"


def _empty(path: str, body: dict[str, object]) -> tuple[dict[str, str], bytes]:
    _, ex = request(path, body)
    return WIRE.empty_response(ex)


def test_empty_chat_completion_parses() -> None:
    headers, body = _empty("/v1/chat/completions", CHAT)
    resp = client_for(200, headers, body).chat.completions.create(**CHAT)  # type: ignore[call-overload]
    assert resp.choices[0].message.content == "" and not resp.choices[0].message.tool_calls
    assert resp.choices[0].finish_reason == "stop"


def test_empty_chat_stream_parses_with_usage() -> None:
    req = dict(CHAT, stream=True, stream_options={"include_usage": True})
    headers, body = _empty("/v1/chat/completions", req)
    assert body.endswith(b"data: [DONE]\n\n")
    chunks = list(client_for(200, headers, body).chat.completions.create(**req))  # type: ignore[call-overload]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ""
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 0


def test_empty_responses_parse() -> None:
    req = {"model": "gpt-4.1", "input": "hi"}
    headers, body = _empty("/v1/responses", req)
    resp = client_for(200, headers, body).responses.create(**req)  # type: ignore[call-overload]
    assert resp.output_text == "" and resp.status == "completed" and resp.output == []
    req["stream"] = True
    headers, body = _empty("/v1/responses", req)
    events = list(client_for(200, headers, body).responses.create(**req))  # type: ignore[call-overload]
    assert [e.type for e in events] == ["response.created", "response.completed"]


def test_empty_embeddings_and_completions_parse() -> None:
    req = {"model": "text-embedding-3-small", "input": "x"}
    headers, body = _empty("/v1/embeddings", req)
    # An empty embeddings list is the real degenerate answer; openai-python itself rejects it.
    with pytest.raises(ValueError, match="No embedding data"):
        client_for(200, headers, body).embeddings.create(**req)  # type: ignore[arg-type]
    req2 = {"model": "gpt-3.5-turbo-instruct", "prompt": "x"}
    headers, body = _empty("/v1/completions", req2)
    assert client_for(200, headers, body).completions.create(**req2).choices[0].text == ""  # type: ignore[call-overload]
    req2["stream"] = True
    headers, body = _empty("/v1/completions", req2)
    chunks = list(client_for(200, headers, body).completions.create(**req2))  # type: ignore[call-overload]
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_terminal_bytes() -> None:
    assert WIRE.terminal_bytes() == b"data: [DONE]\n\n"
    _, ex = request("/v1/responses", {"model": "gpt-4.1", "input": "hi", "stream": True})
    events = SSEFramer().feed(WIRE.terminal_bytes(ex))
    assert len(events) == 1 and WIRE.is_terminal(events[0])
