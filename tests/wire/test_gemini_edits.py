"""Where the Gemini format hands tool-call arguments and assistant text to a fault (core/wire/gemini_edits.py)."""

from __future__ import annotations

from typing import Any

from brownout.core.wire import by_provider
from tests.wire._wire_helpers import Tagging, tagged

GEMINI = by_provider("gemini")


def chunk(*parts: dict[str, Any], extra: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    cands = [{"content": {"role": "model", "parts": list(parts)}, "index": 0}, *(extra or [])]
    return {"candidates": cands, "modelVersion": "gemini-2.0-flash"}


def test_function_call_args_are_handed_over_as_values() -> None:
    second = {"content": {"parts": [{"functionCall": {"name": "b", "args": {"q": 1}}}]}, "index": 1}
    doc = chunk(
        {"text": "Checking."},
        {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}},
        {"functionCall": {"name": "odd", "args": "already text"}},
        extra=[second],
    )
    edit = Tagging()
    assert GEMINI.edit_tool_arguments(doc, edit) == 2
    assert edit.seen == [("value", {"city": "Paris"}), ("value", {"q": 1})]
    assert doc["candidates"][0]["content"]["parts"][1]["functionCall"] == {"name": "get_weather", "args": "V"}
    assert doc["candidates"][0]["content"]["parts"][2]["functionCall"]["args"] == "already text"


def test_a_streamed_chunk_carries_whole_calls() -> None:
    events = GEMINI.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    assert events(chunk({"functionCall": {"name": "f", "args": {}}}), edit) == 1
    assert events(chunk({"text": "Hi"}), edit) == 0
    assert edit.seen == [("value", {})]


def test_text_goes_into_the_first_answer_part_of_the_first_candidate() -> None:
    doc = chunk({"text": "plan", "thought": True}, {"text": "Sunny"}, extra=[{"content": {"parts": [{"text": "x"}]}}])
    assert GEMINI.edit_assistant_text(doc, tagged)
    assert [p["text"] for p in doc["candidates"][0]["content"]["parts"]] == ["plan", "<Sunny>"]
    assert doc["candidates"][1]["content"]["parts"][0]["text"] == "x"
    call_only = chunk({"functionCall": {"name": "f", "args": {}}})
    assert GEMINI.edit_assistant_text(call_only, tagged)
    assert call_only["candidates"][0]["content"]["parts"][0] == {"text": "<>"}
    assert not GEMINI.edit_assistant_text({"promptFeedback": {"blockReason": "SAFETY"}}, tagged)


def test_stream_text_is_the_first_non_empty_answer_part() -> None:
    events = GEMINI.assistant_text_events()
    assert events is not None
    doc = chunk({"text": "plan", "thought": True}, {"text": ""}, {"text": "Hel"})
    assert events(doc, tagged)
    assert [p["text"] for p in doc["candidates"][0]["content"]["parts"]] == ["plan", "", "<Hel>"]
    assert not events(chunk({"text": ""}), tagged)
    assert not events({"usageMetadata": {}}, tagged)
