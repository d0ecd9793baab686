"""Where the Ollama format hands tool-call arguments and assistant text to a fault (core/wire/ollama_edits.py)."""

from __future__ import annotations

from typing import Any

from brownout.core.wire import by_provider
from tests.wire._wire_helpers import Tagging, tagged

OLLAMA = by_provider("ollama")


def line(done: bool, **message: Any) -> dict[str, Any]:
    return {"model": "llama3.2", "message": {"role": "assistant", **message}, "done": done}


def test_tool_call_arguments_are_handed_over_as_values() -> None:
    doc = line(True, content="", tool_calls=[{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])
    edit = Tagging()
    assert OLLAMA.edit_tool_arguments(doc, edit) == 1
    assert edit.seen == [("value", {"city": "Paris"})]
    assert doc["message"]["tool_calls"][0]["function"]["arguments"] == "V"
    assert OLLAMA.edit_tool_arguments(line(True, content="Hi"), edit) == 0


def test_a_streamed_line_carries_whole_calls() -> None:
    events = OLLAMA.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    calls = [{"function": {"name": "f", "arguments": {"a": 1}}}]
    assert events(line(False, content="", tool_calls=calls), edit) == 1
    assert events({"message": {"tool_calls": calls}}, edit) == 0  # not an Ollama line: no `done`
    assert edit.seen == [("value", {"a": 1})]


def test_text_goes_into_the_chat_message_or_the_generate_response() -> None:
    chat = line(True, content="Hi")
    assert OLLAMA.edit_assistant_text(chat, tagged) and chat["message"]["content"] == "<Hi>"
    generate = {"model": "llama3.2", "response": "Hi", "done": True}
    assert OLLAMA.edit_assistant_text(generate, tagged) and generate["response"] == "<Hi>"
    assert not OLLAMA.edit_assistant_text({"error": "model not found"}, tagged)


def test_stream_text_is_a_non_empty_line() -> None:
    events = OLLAMA.assistant_text_events()
    assert events is not None
    first, last = line(False, content="Hi"), line(True, content="")
    assert events(first, tagged) and first["message"]["content"] == "<Hi>"
    assert not events(last, tagged) and last["message"]["content"] == ""
    generate = {"response": "Hel", "done": False}
    assert events(generate, tagged) and generate["response"] == "<Hel>"
