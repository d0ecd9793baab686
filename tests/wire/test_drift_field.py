"""Each wire format names the field its clients cannot do without (what schema drift renames or drops)."""

from __future__ import annotations

from typing import Any

import pytest

from brownout.core.wire import GENERIC, by_provider

CHAT = {"object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]}
CHUNK = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "hi"}}]}
RESPONSES = {"object": "response", "output": [{"type": "message", "content": []}]}
RESPONSES_DELTA = {"type": "response.output_text.delta", "delta": "hi"}
RESPONSES_DONE = {"type": "response.completed", "response": {"output": []}}
ANTHROPIC = {"type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}
GEMINI = {"candidates": [{"content": {"parts": [{"text": "hi"}]}}]}
OLLAMA_CHAT = {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": True}
OLLAMA_GENERATE = {"model": "m", "response": "hi", "done": True}
JSONRPC = {"jsonrpc": "2.0", "id": 1, "result": {"content": []}}
JSONRPC_ERROR = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}

CASES: list[tuple[str, Any, str | None]] = [
    ("openai", CHAT, "choices[].message"),
    ("openai", CHUNK, "choices[].delta"),
    ("openai", RESPONSES, "output"),
    ("openai", RESPONSES_DELTA, "delta"),
    ("openai", RESPONSES_DONE, "response.output"),
    ("anthropic", ANTHROPIC, "content"),
    ("anthropic", {"type": "message_start", "message": {"content": []}}, "message.content"),
    ("anthropic", {"type": "content_block_start", "content_block": {"type": "text"}}, "content_block"),
    ("anthropic", {"type": "content_block_delta", "delta": {"text": "hi"}}, "delta"),
    ("anthropic", {"type": "message_stop"}, None),
    ("gemini", GEMINI, "candidates"),
    ("ollama", OLLAMA_CHAT, "message"),
    ("ollama", OLLAMA_GENERATE, "response"),
    ("mcp", JSONRPC, "result"),
    ("mcp", JSONRPC_ERROR, "error"),
    ("openai", "[DONE]", None),
    ("gemini", CHAT, None),  # a provider names only its own shapes
]


@pytest.mark.parametrize(("provider", "doc", "field"), CASES)
def test_each_format_names_its_own_field(provider: str, doc: Any, field: str | None) -> None:
    assert by_provider(provider).drift_field(doc) == field


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (CHAT, "choices[].message"),
        (ANTHROPIC, "content"),
        (GEMINI, "candidates"),
        (OLLAMA_GENERATE, "response"),
        (JSONRPC, "result"),
        ({"temp_c": 18}, None),
    ],
)
def test_the_generic_format_goes_by_shape(doc: Any, field: str | None) -> None:
    """OpenAI-compatible servers and gateways on their own paths: every provider's shapes in turn."""
    assert GENERIC.drift_field(doc) == field
