"""Where the OpenAI format hands tool-call arguments and assistant text to a fault (core/wire/openai_edits.py)."""

from __future__ import annotations

from brownout.core.wire import by_provider
from tests.wire._wire_helpers import Tagging, tagged

OPENAI = by_provider("openai")


def call(index: int, args: object, name: str = "get_weather") -> dict[str, object]:
    return {"id": f"call_{index}", "type": "function", "function": {"name": name, "arguments": args}}


def test_chat_answer_hands_every_calls_json_text() -> None:
    doc = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "tool_calls": [call(0, '{"a":1}'), call(1, '{"b":2}')]}},
            {"index": 1, "message": {"role": "assistant", "function_call": {"name": "f", "arguments": "{}"}}},
            {"index": 2, "message": {"role": "assistant", "tool_calls": [call(0, {"not": "text"})]}},
        ]
    }
    edit = Tagging()
    assert OPENAI.edit_tool_arguments(doc, edit) == 3
    assert edit.seen == [("text", '{"a":1}'), ("text", '{"b":2}'), ("text", "{}")]
    assert doc["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] == 'T{"b":2}'
    assert doc["choices"][1]["message"]["function_call"]["arguments"] == "T{}"
    assert doc["choices"][2]["message"]["tool_calls"][0]["function"]["arguments"] == {"not": "text"}


def test_responses_answer_hands_function_call_items() -> None:
    doc = {
        "object": "response",
        "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "id": "fc_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "web_search_call", "arguments": "{}"},
        ],
    }
    edit = Tagging()
    assert OPENAI.edit_tool_arguments(doc, edit) == 1
    assert doc["output"][1]["arguments"] == 'T{"city":"Paris"}' and doc["output"][2]["arguments"] == "{}"


def test_an_answer_without_calls_changes_nothing() -> None:
    doc = {"choices": [{"message": {"role": "assistant", "content": "Hi"}}]}
    edit = Tagging()
    assert OPENAI.edit_tool_arguments(doc, edit) == 0 and edit.seen == []
    assert OPENAI.edit_tool_arguments(["not", "an", "object"], edit) == 0


def test_chat_stream_fragments_are_keyed_by_choice_and_call_index() -> None:
    events = OPENAI.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    first = {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": ""}}]}}]}
    second = {
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": '{"ci'}},
                        {"index": 1, "function": {"name": "search"}},
                    ]
                },
            }
        ]
    }
    text = {"choices": [{"index": 0, "delta": {"content": "Hi"}}]}
    assert events(first, edit) == 1  # handed over; the edit returned something else
    assert events(second, edit) == 1
    assert events(text, edit) == 0
    assert edit.seen == [("fragment", ("chat", 0, 0), ""), ("fragment", ("chat", 0, 0), '{"ci')]
    assert second["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] == 'F{"ci'


def test_responses_stream_fragments_and_their_repeats_share_the_item_key() -> None:
    events = OPENAI.tool_arguments_events()
    assert events is not None
    edit = Tagging()
    added = {"type": "response.output_item.added", "item": {"type": "function_call", "id": "fc_1", "arguments": ""}}
    delta = {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "delta": '{"city":'}
    done = {"type": "response.function_call_arguments.done", "item_id": "fc_1", "arguments": '{"city":"P"}'}
    item_done = {
        "type": "response.output_item.done",
        "item": {"type": "function_call", "id": "fc_1", "arguments": '{"city":"P"}'},
    }
    completed = {
        "type": "response.completed",
        "response": {"output": [{"type": "function_call", "id": "fc_1", "arguments": '{"city":"P"}'}]},
    }
    assert [events(e, edit) for e in (added, delta, done, item_done, completed)] == [0, 1, 1, 1, 1]
    key = ("resp", "fc_1")
    assert edit.seen == [
        ("fragment", key, '{"city":'),
        ("repeat", key, '{"city":"P"}'),
        ("repeat", key, '{"city":"P"}'),
        ("repeat", key, '{"city":"P"}'),
    ]
    assert done["arguments"] == 'R{"city":"P"}' and completed["response"]["output"][0]["arguments"].startswith("R")


def test_chat_text_goes_into_every_choice() -> None:
    doc = {"choices": [{"message": {"content": "Hi"}}, {"message": {"content": None, "tool_calls": []}}]}
    assert OPENAI.edit_assistant_text(doc, tagged)
    assert [c["message"]["content"] for c in doc["choices"]] == ["<Hi>", "<>"]


def test_responses_text_goes_into_the_first_message_item() -> None:
    doc = {
        "output": [
            {"type": "reasoning", "summary": []},
            {"type": "message", "content": [{"type": "refusal", "refusal": "no"}]},
            {"type": "message", "content": [{"type": "output_text", "text": "second"}]},
        ]
    }
    assert OPENAI.edit_assistant_text(doc, tagged)
    assert doc["output"][1]["content"][1] == {"type": "output_text", "text": "<>", "annotations": []}
    assert doc["output"][2]["content"][0]["text"] == "second"
    assert not OPENAI.edit_assistant_text({"output": [{"type": "function_call"}]}, tagged)
    assert not OPENAI.edit_assistant_text({"error": {"message": "x"}}, tagged)


def test_stream_text_is_the_first_non_empty_delta() -> None:
    events = OPENAI.assistant_text_events()
    assert events is not None
    role_only = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}
    resp = {"type": "response.output_text.delta", "item_id": "msg_1", "delta": "lo"}
    assert not events(role_only, tagged) and role_only["choices"][0]["delta"]["content"] == ""
    assert events(chunk, tagged) and chunk["choices"][0]["delta"]["content"] == "<Hel>"
    assert events(resp, tagged) and resp["delta"] == "<lo>"
    assert not events({"type": "response.created"}, tagged) and not events("[DONE]", tagged)
