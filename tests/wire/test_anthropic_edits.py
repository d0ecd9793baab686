"""Where the Anthropic format hands tool-call arguments and assistant text to a fault (core/wire/anthropic_edits.py)."""

from __future__ import annotations

from brownout.core.wire import by_provider
from tests.wire._wire_helpers import Tagging, tagged

ANTHROPIC = by_provider("anthropic")


def message(*content: dict[str, object]) -> dict[str, object]:
    return {"id": "msg_1", "type": "message", "role": "assistant", "content": list(content)}


def test_tool_use_input_is_handed_over_as_an_object_with_its_tool_name() -> None:
    doc = message(
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
        {"type": "server_tool_use", "id": "t2", "name": "web_search", "input": {"query": "x"}},
        {"type": "tool_use", "id": "t3", "input": "not an object"},
    )
    edit = Tagging()
    assert ANTHROPIC.edit_tool_arguments(doc, edit) == 2
    assert edit.seen == [("object", {"city": "Paris"}, "get_weather"), ("object", {"query": "x"}, "web_search")]
    assert doc["content"][1]["input"] == {"city": "Paris", "o": True}  # edited in place, still an object
    assert ANTHROPIC.edit_tool_arguments(message({"type": "text", "text": "Hi"}), edit) == 0


def test_stream_input_json_fragments_are_keyed_by_block_index() -> None:
    events = ANTHROPIC.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    start = {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "input": {}}}
    frag = {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"ci'}}
    text = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}
    assert [events(e, edit) for e in (start, frag, text, {"type": "message_stop"})] == [0, 1, 0, 0]
    assert edit.seen == [("fragment", ("anthropic", 1), '{"ci')]
    assert frag["delta"]["partial_json"] == 'F{"ci'


def test_text_goes_into_the_first_text_block_or_a_new_one_in_front() -> None:
    doc = message({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    assert ANTHROPIC.edit_assistant_text(doc, tagged)
    assert [b["text"] for b in doc["content"]] == ["<a>", "b"]
    tool_only = message({"type": "tool_use", "id": "t1", "name": "f", "input": {}})
    assert ANTHROPIC.edit_assistant_text(tool_only, tagged)
    assert tool_only["content"][0] == {"type": "text", "text": "<>"} and tool_only["content"][1]["type"] == "tool_use"
    assert not ANTHROPIC.edit_assistant_text({"type": "error", "error": {"type": "overloaded_error"}}, tagged)


def test_stream_text_is_a_text_delta() -> None:
    events = ANTHROPIC.assistant_text_events()
    assert events is not None
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}
    thinking = {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hm"}}
    assert events(delta, tagged) and delta["delta"]["text"] == "<Hel>"
    assert not events(thinking, tagged) and thinking["delta"] == {"type": "thinking_delta", "thinking": "hm"}
    assert not events({"type": "message_start", "message": message()}, tagged)
