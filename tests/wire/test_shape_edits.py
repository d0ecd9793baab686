"""Formats that cannot tell the provider find the places by shape (core/wire/shape_edits.py); others find none."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire import GENERIC, by_provider
from brownout.core.wire.base import RequestInfo, StreamParser, WireFormat
from tests.wire._wire_helpers import Tagging, request, tagged

CHAT = {"choices": [{"index": 0, "message": {"content": "Hi", "tool_calls": [{"function": {"arguments": "{}"}}]}}]}
ANTHROPIC_MSG = {"type": "message", "content": [{"type": "tool_use", "name": "f", "input": {"a": 1}}]}
GEMINI = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {"a": 1}}}]}}]}
OLLAMA = {"message": {"content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]}, "done": True}


def test_an_openai_compatible_server_on_its_own_path_is_the_generic_format() -> None:
    fmt, _ = request("/llm/v2/generate", {"model": "m", "messages": []})
    assert fmt is GENERIC


@pytest.mark.parametrize(
    ("doc", "seen"),
    [
        (CHAT, [("text", "{}")]),
        (ANTHROPIC_MSG, [("object", {"a": 1}, "f")]),
        (GEMINI, [("value", {"a": 1})]),
        (OLLAMA, [("value", {"a": 1})]),
    ],
)
def test_generic_finds_each_providers_arguments_by_shape(doc: dict[str, Any], seen: list[Any]) -> None:
    edit = Tagging()
    assert GENERIC.edit_tool_arguments(copy.deepcopy(doc), edit) == 1 and edit.seen == seen


def test_generic_stream_events_by_shape() -> None:
    events = GENERIC.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    chat = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 2, "function": {"arguments": "{"}}]}}]}
    anthropic = {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": "{"}}
    gemini, ollama = copy.deepcopy(GEMINI), copy.deepcopy(OLLAMA)
    assert [events(e, edit) for e in (chat, anthropic, gemini, ollama)] == [1, 1, 1, 1]
    assert [s[:2] for s in edit.seen] == [
        ("fragment", ("chat", 0, 2)),
        ("fragment", ("anthropic", 1)),
        ("value", {"a": 1}),
        ("value", {"a": 1}),
    ]


def test_generic_text_by_shape() -> None:
    chat = {"choices": [{"message": {"content": "Hi"}}]}
    assert GENERIC.edit_assistant_text(chat, tagged) and chat["choices"][0]["message"]["content"] == "<Hi>"
    assert not GENERIC.edit_assistant_text({"items": [1, 2]}, tagged)
    events = GENERIC.assistant_text_events()
    assert events is not None
    delta = {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "a"}}
    line = {"response": "b", "done": False}
    assert (
        events(delta, tagged) and events(line, tagged) and (delta["delta"]["text"], line["response"]) == ("<a>", "<b>")
    )


class Bare(WireFormat):
    """A format that implements only what it must."""

    provider = "bare"

    def recognise(self, req: RequestInfo) -> str | None:
        return None

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        pass

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        raise NotImplementedError


@pytest.mark.parametrize("fmt", [Bare(), by_provider("mcp")], ids=["bare", "mcp"])
def test_formats_without_the_hooks_find_no_place(fmt: WireFormat) -> None:
    edit, doc = Tagging(), copy.deepcopy(CHAT)
    assert fmt.edit_tool_arguments(doc, edit) == 0 and fmt.tool_arguments_events() is None
    assert not fmt.edit_assistant_text(doc, tagged) and fmt.assistant_text_events() is None
    assert edit.seen == [] and doc == CHAT
