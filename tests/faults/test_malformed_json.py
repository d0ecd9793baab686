from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from brownout.core.exchange import ToolSpec
from brownout.core.wire import by_provider
from brownout.faults.base import NotApplicable
from brownout.faults.jsonedit import corrupt_json_text
from brownout.faults.malformed_json import MalformedJsonFault, MalformedJsonParams
from tests.faults.conftest import FakeWire, ndjson, run_editor, sse
from tests.faults.samples import (
    ANTHROPIC_MSG,
    ANTHROPIC_TOOL_STREAM,
    GEMINI,
    JSON,
    OLLAMA,
    OPENAI_CHAT,
    OPENAI_RESPONSES,
    OPENAI_TEXT_STREAM,
    OPENAI_TOOL_STREAM,
    SSE,
    anthropic_sdk,
    dump,
    openai_sdk,
    responses_tool_stream,
)


def fault(**kw: object) -> MalformedJsonFault:
    return MalformedJsonFault(MalformedJsonParams.model_validate({"type": "malformed_json", **kw}))


def unparseable(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize(
    "bad",
    [
        {"target": "x"},
        {"event_index": 1},
        {"field": "a"},
        {"target": "schema_drift", "action": "drop", "rename_to": "b"},
        {"event_index": -1, "target": "sse_event"},
    ],
)
def test_invalid(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        MalformedJsonParams.model_validate({"type": "malformed_json", **bad})


@pytest.mark.parametrize("seed", range(50))
def test_corruption_never_parses_and_is_seeded(seed: int) -> None:
    for text in (json.dumps(OPENAI_CHAT), "{}", "[]", '{"a": "b"}', "3"):
        out = corrupt_json_text(text, random.Random(seed))
        assert unparseable(out) and out == corrupt_json_text(text, random.Random(seed))


def test_body_openai_sdk_fails_to_parse(make_ctx) -> None:
    body = fault().edit_body(make_ctx(), dump(OPENAI_CHAT), dict(JSON))
    with pytest.raises(json.JSONDecodeError):
        openai_sdk(200, JSON, body).chat.completions.create(model="m", messages=[])
    with pytest.raises(NotApplicable, match="not JSON"):
        fault().edit_body(make_ctx(), b"<html>", {"content-type": "text/html"})


@pytest.mark.parametrize("target", ["body", "tool_arguments", "schema_drift"])
def test_json_nested_too_deeply_is_not_applicable(make_ctx, target: str) -> None:
    deep = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(NotApplicable, match="too deeply"):
        fault(target=target).edit_body(make_ctx(), deep, dict(JSON))


def test_a_streamed_body_that_is_no_event_stream_cannot_be_edited(make_ctx) -> None:
    with pytest.raises(NotApplicable, match="not an event stream"):
        fault().stream_editor(make_ctx(content_type="application/json"))


def test_tool_arguments_openai_chat(make_ctx) -> None:
    body = fault(target="tool_arguments").edit_body(make_ctx(wire=by_provider("openai")), dump(OPENAI_CHAT), dict(JSON))
    msg = openai_sdk(200, JSON, body).chat.completions.create(model="m", messages=[]).choices[0].message
    assert msg.tool_calls[0].function.name == "get_weather" and unparseable(msg.tool_calls[0].function.arguments)


def test_tool_arguments_openai_responses(make_ctx) -> None:
    body = fault(target="tool_arguments").edit_body(
        make_ctx(wire=by_provider("openai")), dump(OPENAI_RESPONSES), dict(JSON)
    )
    resp = openai_sdk(200, JSON, body).responses.create(model="m", input="hi")
    assert unparseable(resp.output[1].arguments)


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "units": {"type": "string"}},
    "required": ["city"],
}


def anthropic_input(body: bytes) -> object:
    block = anthropic_sdk(200, JSON, body).messages.create(model="c", max_tokens=9, messages=[]).content[1]
    assert block.type == "tool_use"
    return block.input


def test_tool_arguments_anthropic_input_stays_an_object_that_breaks_the_schema(make_ctx) -> None:
    # The API always returns `input` as an object: the realistic fault is one the tool's schema rejects.
    ctx = make_ctx(wire=by_provider("anthropic"), tools_declared=[ToolSpec("get_weather", WEATHER_SCHEMA)])
    doc = json.loads(dump(ANTHROPIC_MSG))
    doc["content"][1]["input"] = {"units": "metric", "city": "Paris"}
    assert anthropic_input(fault(target="tool_arguments").edit_body(ctx, dump(doc), dict(JSON))) == {"units": "metric"}
    # No declared schema to go by: the first value gets the wrong type.
    body = fault(target="tool_arguments").edit_body(
        make_ctx(wire=by_provider("anthropic")), dump(ANTHROPIC_MSG), dict(JSON)
    )
    assert anthropic_input(body) == {"city": ["Paris"]}
    doc["content"][1]["input"] = {"days": 3}
    assert anthropic_input(
        fault(target="tool_arguments").edit_body(make_ctx(wire=by_provider("anthropic")), dump(doc), dict(JSON))
    ) == {"days": "3"}
    # An empty input breaks no schema without a required key: left alone (the fault does not apply).
    doc["content"][1]["input"] = {}
    with pytest.raises(NotApplicable, match="nothing to change"):
        fault(target="tool_arguments").edit_body(make_ctx(wire=by_provider("anthropic")), dump(doc), dict(JSON))


@pytest.mark.parametrize(
    "provider,doc,get",
    [
        ("gemini", GEMINI, lambda d: d["candidates"][0]["content"]["parts"][1]["functionCall"]["args"]),
        ("ollama", OLLAMA, lambda d: d["message"]["tool_calls"][0]["function"]["arguments"]),
    ],
)
def test_tool_arguments_object_args(make_ctx, provider: str, doc: dict, get) -> None:
    ctx = make_ctx(wire=by_provider(provider))
    out = json.loads(fault(target="tool_arguments").edit_body(ctx, dump(doc), dict(JSON)))
    assert isinstance(get(out), str) and unparseable(get(out))


def test_tool_arguments_openai_stream_reassembles_to_garbage(make_ctx) -> None:
    out, _ = run_editor(
        fault(target="tool_arguments").stream_editor(make_ctx(wire=by_provider("openai"), stream=True)),
        sse(*OPENAI_TOOL_STREAM),
    )
    args = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in openai_sdk(200, SSE, out).chat.completions.create(model="m", messages=[], stream=True)
        if c.choices[0].delta.tool_calls
    )
    assert args and unparseable(args)


def test_tool_arguments_anthropic_stream(make_ctx) -> None:
    out, _ = run_editor(
        fault(target="tool_arguments").stream_editor(make_ctx(wire=by_provider("anthropic"), stream=True)),
        sse(*ANTHROPIC_TOOL_STREAM, done=False),
    )
    client = anthropic_sdk(200, SSE, out)
    parts = [
        e.delta.partial_json
        for e in client.messages.create(model="c", max_tokens=9, messages=[], stream=True)
        if e.type == "content_block_delta"
    ]
    assert unparseable("".join(parts))
    # The SDK's accumulating helper parses leniently (partial mode): the input is no object.
    with client.messages.stream(model="c", max_tokens=9, messages=[]) as stream:
        assert not isinstance(stream.get_final_message().content[0].input, dict)


def test_tool_arguments_ollama_stream(make_ctx) -> None:
    out, _ = run_editor(
        fault(target="tool_arguments").stream_editor(make_ctx(wire=by_provider("ollama"), stream=True)), ndjson(OLLAMA)
    )
    assert isinstance(json.loads(out)["message"]["tool_calls"][0]["function"]["arguments"], str)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_sse_event_openai_stream_raises_in_sdk(make_ctx, index: int) -> None:
    events = sse(*OPENAI_TEXT_STREAM)
    out, _ = run_editor(fault(target="sse_event", event_index=index).stream_editor(make_ctx(stream=True)), events)
    assert out.count(b"\n\n") == len(events)  # framing intact, one data frame broken
    with pytest.raises(json.JSONDecodeError):
        list(openai_sdk(200, SSE, out).chat.completions.create(model="m", messages=[], stream=True))


def test_sse_event_falls_back_to_terminal(make_ctx) -> None:
    ctx = make_ctx(wire=by_provider("openai"), stream=True)
    out, _ = run_editor(fault(target="sse_event", event_index=50).stream_editor(ctx), sse(*OPENAI_TEXT_STREAM))
    assert out.endswith(b"data: [DONE\n\n")


def test_sse_event_is_seeded(make_ctx) -> None:
    events = sse(*OPENAI_TEXT_STREAM)
    runs = {run_editor(fault(target="sse_event").stream_editor(make_ctx(seed=s)), events)[0] for s in (4, 4)}
    assert len(runs) == 1


def test_schema_drift_openai_default_renames_message(make_ctx) -> None:
    body = fault(target="schema_drift").edit_body(make_ctx(wire=by_provider("openai")), dump(OPENAI_CHAT), dict(JSON))
    assert "msg" not in json.loads(body)["choices"][0] and "message_v2" in json.loads(body)["choices"][0]
    choice = openai_sdk(200, JSON, body).chat.completions.create(model="m", messages=[]).choices[0]
    assert getattr(choice, "message", None) is None


def test_schema_drift_defaults_to_the_field_the_wire_format_names(make_ctx) -> None:
    """The fault knows no provider's shapes: a format that names no field leaves the answer alone."""

    class PayloadWire(FakeWire):
        def drift_field(self, doc):
            return "payload" if isinstance(doc, dict) and "payload" in doc else None

    answer = {"payload": {"text": "hi"}, "choices": [{"message": {"content": "hi"}}]}
    body = fault(target="schema_drift").edit_body(make_ctx(wire=PayloadWire()), dump(answer), dict(JSON))
    assert json.loads(body) == {"payload_v2": {"text": "hi"}, "choices": [{"message": {"content": "hi"}}]}
    out, _ = run_editor(fault(target="schema_drift").stream_editor(make_ctx(wire=PayloadWire())), sse(answer))
    assert b'"payload_v2"' in out and b'"message"' in out
    with pytest.raises(NotApplicable):
        fault(target="schema_drift").edit_body(make_ctx(wire=FakeWire()), dump(OPENAI_CHAT), dict(JSON))


def test_schema_drift_drop_choices(make_ctx) -> None:
    body = fault(target="schema_drift", field="choices", action="drop").edit_body(
        make_ctx(), dump(OPENAI_CHAT), dict(JSON)
    )
    assert openai_sdk(200, JSON, body).chat.completions.create(model="m", messages=[]).choices is None


def test_schema_drift_stream_renames_delta(make_ctx) -> None:
    f = fault(target="schema_drift", field="choices[].delta", rename_to="d")
    out, _ = run_editor(f.stream_editor(make_ctx(stream=True)), sse(*OPENAI_TEXT_STREAM))
    assert b'"delta"' not in out and out.count(b'"d":') == len(OPENAI_TEXT_STREAM)


def test_structured_content_no_longer_fits_the_output_schema(make_ctx) -> None:
    from jsonschema import Draft202012Validator

    output_schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}, "tags": {"type": "array"}},
        "required": ["city", "temp_c"],
    }
    result = {
        "jsonrpc": "2.0",
        "id": 4,
        "result": {
            "content": [{"type": "text", "text": "18C in Oslo"}],
            "structuredContent": {"city": "Oslo", "temp_c": 18, "tags": ["mild"]},
            "isError": False,
        },
    }
    assert Draft202012Validator(output_schema).is_valid(result["result"]["structuredContent"])
    f = MalformedJsonFault(MalformedJsonParams(type="malformed_json", target="structured_content"))
    out = json.loads(
        f.edit_body(make_ctx(provider="mcp"), json.dumps(result).encode(), {"content-type": "application/json"})
    )
    bad = out["result"]["structuredContent"]
    assert bad == {"city": 4, "temp_c": "18", "tags": {"0": "mild"}}
    assert len(list(Draft202012Validator(output_schema).iter_errors(bad))) == 3
    assert out["result"]["content"] == result["result"]["content"]
    # A result without structuredContent is left alone: the fault does not apply.
    plain = json.dumps({"jsonrpc": "2.0", "id": 5, "result": {"content": []}}).encode()
    with pytest.raises(NotApplicable, match="nothing to change"):
        f.edit_body(make_ctx(provider="mcp"), plain, {"content-type": "application/json"})


def test_tool_arguments_need_a_wire_format_that_knows_them(make_ctx) -> None:
    # The fake wire format implements none of the hooks: OpenAI-shaped calls are nothing to it.
    with pytest.raises(NotApplicable, match="nothing to change for target tool_arguments"):
        fault(target="tool_arguments").edit_body(make_ctx(), dump(OPENAI_CHAT), dict(JSON))
    with pytest.raises(NotApplicable, match="the fake wire format locates no tool-call arguments in streams"):
        fault(target="tool_arguments").stream_editor(make_ctx(stream=True))
    body = b"".join(e.raw for e in sse(*OPENAI_TOOL_STREAM))
    with pytest.raises(NotApplicable, match="locates no tool-call arguments"):
        fault(target="tool_arguments").edit_body(make_ctx(), body, dict(SSE))


def test_tool_arguments_responses_stream_copies_agree_with_the_fragments(make_ctx) -> None:
    ctx = make_ctx(wire=by_provider("openai"), stream=True, operation="responses")
    stream = sse(*responses_tool_stream('{"ci', 'ty": "Pa', 'ris"}'), done=False)
    out, _ = run_editor(fault(target="tool_arguments").stream_editor(ctx), stream)
    events = list(openai_sdk(200, SSE, out).responses.create(model="m", input="x", stream=True))
    streamed = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    copies = [e.arguments for e in events if e.type == "response.function_call_arguments.done"]
    copies += [e.item.arguments for e in events if e.type == "response.output_item.done"]
    copies += [i.arguments for e in events if e.type == "response.completed" for i in e.response.output]
    assert copies == [streamed] * 3 and unparseable(streamed)
