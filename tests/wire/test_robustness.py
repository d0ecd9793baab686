"""Hostile input: garbage, truncated JSON, non-UTF-8 and type confusion never raise out of a parser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire import BUILTIN
from brownout.core.wire.base import StreamEvent
from brownout.core.wire.common import ProviderFormat
from brownout.core.wire.framing import EventStreamFramer, NDJSONFramer, SSEFramer
from brownout.core.wire.openai import OpenAIFormat
from brownout.proxy import bodies

FORMATS = BUILTIN.formats

# Every key a parser looks at, so fuzzed JSON reaches the deep branches.
KEYS = [
    "model", "stream", "stream_options", "include_usage", "tools", "function", "functions", "name", "parameters",
    "messages", "role", "content", "text", "type", "tool_calls", "id", "index", "arguments", "tool_call_id",
    "input", "instructions", "call_id", "output", "prompt", "choices", "delta", "finish_reason", "message",
    "usage", "prompt_tokens", "completion_tokens", "input_tokens", "output_tokens", "error", "code", "status",
    "item", "item_id", "output_index", "response", "incomplete_details", "reason", "system", "input_schema",
    "tool_use_id", "is_error", "stop_reason", "content_block", "partial_json", "contents", "parts",
    "functionCall", "functionResponse", "args", "functionDeclarations", "systemInstruction", "candidates",
    "finishReason", "usageMetadata", "promptTokenCount", "candidatesTokenCount", "done", "done_reason",
    "prompt_eval_count", "eval_count", "tool_name", "jsonrpc", "method", "params", "result", "isError",
    "inputSchema", "resource", "responseId", "modelVersion", "cache_read_input_tokens", "thought",
    "toolConfig", "toolSpec", "toolUse", "toolUseId", "toolResult", "contentBlockIndex", "start", "stopReason",
    "inputTokens", "outputTokens", "cacheReadInputTokens", "bytes", "amazon-bedrock-invocationMetrics",
]  # fmt: skip
TYPES = ["text_delta", "input_json_delta", "tool_use", "tool_result", "function_call", "function_call_output",
         "message", "output_text", "response.completed", "response.output_item.added", "message_start",
         "content_block_start", "content_block_delta", "message_delta", "message_stop", "error", "2.0",
         "tools/call", "tools/list", "function"]  # fmt: skip

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False),
    st.sampled_from(TYPES),
    st.text(max_size=5),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(KEYS), inner, max_size=6)),
    max_leaves=40,
)
PATHS = {
    "mcp": "/mcp", "openai": "/v1/chat/completions", "anthropic": "/v1/messages",
    "gemini": "/v1beta/models/g:streamGenerateContent?alt=sse", "ollama": "/api/chat", "http": "/tools/t",
    "bedrock": "/model/m/converse-stream",
    "openai_realtime": "/v1/realtime?model=m",
    "gemini_live": "/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent",
    "otlp": "/v1/traces",
}  # fmt: skip
OPERATIONS = {"mcp": "tools/call", "openai": "chat", "anthropic": "chat", "gemini": "generate_content",
              "ollama": "chat", "http": "execute_tool", "bedrock": "chat", "openai_realtime": "realtime_session",
              "gemini_live": "realtime_session", "otlp": "export_traces"}  # fmt: skip


def exchange(fmt: ProviderFormat, operation: str | None = None) -> Exchange:
    ex = Exchange(id="r", session="s", path=PATHS[fmt.provider])
    ex.provider, ex.operation = fmt.provider, operation or OPERATIONS[fmt.provider]
    return ex


BUGS = ("NameError", "AttributeError", "KeyError", "TypeError", "IndexError", "UnboundLocalError")


def assert_no_bug(ex: Exchange) -> None:
    """Bad input may stop a parser (ValueError family); a programming error must not hide behind the boundary."""
    assert ex.parse_error is None or not any(b in ex.parse_error for b in BUGS), ex.parse_error


def exercise(fmt: ProviderFormat, body: bytes, operation: str | None = None) -> Exchange:
    ex = exchange(fmt, operation)
    fmt.parse_request(ex, body)
    fmt.parse_response(ex, body)
    assert_no_bug(ex)
    parser = fmt.stream_parser(exchange(fmt, operation))
    for framer in (SSEFramer(), NDJSONFramer(), EventStreamFramer()):
        for ev in framer.feed(body) + framer.flush():
            parser.feed(ev)
            fmt.is_terminal(ev)
    parser.feed(StreamEvent(raw=body, data=body.decode("utf-8", "replace")))
    parser.finish()
    assert_no_bug(parser.exchange)
    return ex


GARBAGE = [
    b"",
    b"   ",
    b"\xff\xfe\x00garbage",
    b"{",
    b"[",
    b'{"model": "gpt',
    b"null",
    b"42",
    b'"str"',
    b"[]",
    b'{"jsonrpc": "2.0", "method": 5}',
    b"data: [DONE]\n\n",
    b"data: {\n\n",
    b"\x00" * 50,
    b'{"messages": 5, "tools": "x", "choices": [1, null, {"delta": 3}]}',
    b'{"choices":[{"delta":{"tool_calls":[{"index":"0","function":{"arguments":7}}]}}]}',
    '{"text": "\udcff"}'.encode("utf-8", "surrogatepass"),
    b"[" * 100000,  # deep nesting: RecursionError inside json
]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.provider)
@pytest.mark.parametrize("body", GARBAGE, ids=range(len(GARBAGE)))
def test_garbage_never_raises(fmt: ProviderFormat, body: bytes) -> None:
    exercise(fmt, body)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=json_values,
    which=st.integers(0, len(FORMATS) - 1),
    op=st.sampled_from([None, "responses", "text_completion", "tools/list"]),
)
def test_fuzzed_json_never_raises(value: Any, which: int, op: str | None) -> None:
    fmt = FORMATS[which]
    exercise(fmt, json.dumps(value).encode(), op if fmt.provider in ("openai", "mcp") else None)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300), which=st.integers(0, len(FORMATS) - 1))
def test_random_bytes_never_raise(data: bytes, which: int) -> None:
    exercise(FORMATS[which], data)


def test_truncated_realistic_payloads_never_raise() -> None:
    from tests.wire.test_anthropic import realistic_stream
    from tests.wire.test_bedrock import claude_stream, converse_stream
    from tests.wire.test_openai import parallel_tool_stream, responses_stream

    for fmt_name, body, op in (("openai", parallel_tool_stream()[0], "chat"), ("openai", responses_stream(), "responses"),
                               ("anthropic", realistic_stream(), "chat"), ("bedrock", converse_stream(), "chat"),
                               ("bedrock", claude_stream(), "chat")):  # fmt: skip
        fmt = next(f for f in FORMATS if f.provider == fmt_name)
        for cut in range(0, len(body), 37):
            ex = exercise(fmt, body[:cut], op)
            assert ex.stream_complete is None or isinstance(ex.stream_complete, bool)


def test_parse_error_is_recorded_not_raised() -> None:
    fmt = FORMATS[1]
    ex = exchange(fmt)
    fmt.parse_response(ex, b'{"choices": [')
    assert ex.parse_error and ex.parse_error.startswith("response: JSONDecodeError")
    assert ex.parse_error_reason == "invalid_json"
    ex = exchange(fmt)
    parser = fmt.stream_parser(ex)
    parser.feed(StreamEvent(raw=b"data: {oops\n\n", data="{oops"))
    parser.finish()
    assert ex.parse_error and "JSONDecodeError" in ex.parse_error and ex.stream_events == 1
    assert ex.parse_error_reason == "invalid_json"


@pytest.mark.parametrize(
    ("provider", "body", "reason"),
    [
        ("openai", b'{"choices": [', "invalid_json"),
        ("openai", b'{"choices": "\xff\xfe"}', "invalid_json"),  # not UTF-8
        ("anthropic", b"[" * 100_000, "too_deep"),
        ("gemini", b'[{"candidates": []}, ', "invalid_json"),  # a JSON-array stream cut between chunks
        ("mcp", b'{"jsonrpc": "2.0", "id": 1, "result": {', "invalid_json"),
    ],
)
def test_malformed_bodies_are_recorded_with_their_reason(provider: str, body: bytes, reason: str) -> None:
    fmt = BUILTIN.by_provider(provider)
    assert isinstance(fmt, ProviderFormat)
    ex = exchange(fmt)
    fmt.parse_response(ex, body)
    assert ex.parse_error_reason == reason and ex.parse_error


class _BuggyOpenAI(OpenAIFormat):
    """OpenAI's format with a bug in its response hook: a KeyError on a body that is perfectly valid."""

    def _response(self, exchange: Exchange, data: Any) -> None:
        raise KeyError("a field the parser forgot to check for")


def test_a_parser_bug_is_raised_to_the_guard_not_recorded_as_a_parse_error() -> None:
    fmt, body = _BuggyOpenAI(), b'{"choices": []}'
    ex = exchange(fmt)
    with pytest.raises(KeyError):
        fmt.parse_response(ex, body)
    assert ex.parse_error is None and ex.parse_error_reason is None
    # Through the proxy's parse step: a guard counts it, a strict one (the tests') raises it.
    guard = Guard()
    bodies.parse(fmt, ex, body, guard)
    assert guard.snapshot() == {"wire": 1} and ex.parse_error is None
    with pytest.raises(KeyError):
        bodies.parse(fmt, exchange(fmt), body, Guard(strict=True))
    # Malformed bytes are no bug: recorded, never raised, even by a strict guard.
    strict, ex = Guard(strict=True), exchange(fmt)
    bodies.parse(fmt, ex, b'{"choices": [oops', strict)
    assert ex.parse_error_reason == "invalid_json" and strict.snapshot() == {}
