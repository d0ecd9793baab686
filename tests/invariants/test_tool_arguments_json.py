from __future__ import annotations

import json

from brownout.core.exchange import Exchange, ToolCall, ToolResult, ToolSpec
from tests.invariants.builders import Harness, llm, tool, weather_tool


def test_unparseable_arguments_are_flagged_without_echoing_them() -> None:
    h = Harness([{"type": "tool_arguments_json"}])
    (v,) = h.run(llm(0, calls=[("get_weather", '{"city": "Oslo", "secret": "hunter2"'), ("ok", "{}")]))
    assert v.tool == "get_weather"
    assert "not valid JSON" in v.message and "tool_calls[0]" in v.message
    assert "hunter2" not in v.message and "hunter2" not in json.dumps(v.to_dict())
    (v,) = h.run(llm(1, calls=[("get_weather", "[1, 2]")]))
    assert "not an object" in v.message


def test_valid_arguments_pass() -> None:
    h = Harness([{"type": "tool_arguments_json", "schema": True}])
    assert h.run(llm(0, tools=[weather_tool()], calls=[("get_weather", '{"city": "Oslo", "days": 2}')])) == []
    assert h.run(llm(1, calls=[("undeclared", '{"anything": 1}')])) == []  # no schema: JSON is enough


def test_schema_violation_against_tool_declared_earlier_in_session() -> None:
    h = Harness([{"type": "tool_arguments_json", "schema": True}])
    assert h.run(llm(0, tools=[weather_tool()], calls=[])) == []
    (missing,) = h.run(llm(1, calls=[("get_weather", '{"days": 2}')]))
    assert "'city' is a required property at $" in missing.message
    (wrong_type,) = h.run(llm(2, calls=[("get_weather", '{"city": "Oslo", "days": "two-secret"}')]))
    assert "`type` failed at $.days" in wrong_type.message and "two-secret" not in wrong_type.message
    # Another session never declared the tool: no schema to check against.
    assert h.run(llm(3, session="other", calls=[("get_weather", '{"days": 2}')])) == []


def test_mcp_tools_list_schema_applies_to_tools_call() -> None:
    h = Harness([{"type": "tool_arguments_json", "schema": True}])
    listing = tool("x", {}, 0)
    listing.operation = listing.mcp_method = "tools/list"
    listing.tool_name, listing.tool_calls = None, []
    listing.tools_declared = [
        ToolSpec("search", {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
    ]
    assert h.run(listing) == []
    assert h.run(tool("search", {"q": "brownout"}, 1)) == []
    (v,) = h.run(tool("search", {"query": "brownout"}, 2))
    assert "executed" in v.message and "'q' is a required property" in v.message


def test_schema_off_ignores_schema_and_bad_schema_is_skipped() -> None:
    h = Harness([{"type": "tool_arguments_json"}])
    assert h.run(llm(0, tools=[weather_tool()], calls=[("get_weather", '{"days": 2}')])) == []
    h = Harness([{"type": "tool_arguments_json", "schema": True}])
    bad = ToolSpec("b", {"type": "no-such-type"})
    assert h.run(llm(0, tools=[bad], calls=[("b", '{"x": 1}')])) == []
    assert h.runner.guard.snapshot() == {}


def test_object_arguments_are_checked_against_the_schema_unless_turned_off() -> None:
    # Anthropic's tool_use.input (and Gemini, Ollama, MCP arguments) are objects on the wire: they
    # cannot be bad JSON, so the declared schema is the check that can find them wrong.
    def anthropic_call(t: float) -> Exchange:
        ex = llm(t, tools=[weather_tool()], provider="anthropic", operation="chat")
        ex.tool_calls = [ToolCall("get_weather", '{"days": 2}', "toolu_1", from_object=True)]
        return ex

    (v,) = Harness([{"type": "tool_arguments_json"}]).run(anthropic_call(0))
    assert "'city' is a required property" in v.message
    assert Harness([{"type": "tool_arguments_json", "schema": False}]).run(anthropic_call(0)) == []


def test_a_cut_streams_tool_call_is_left_to_stream_complete() -> None:
    h = Harness([{"type": "tool_arguments_json"}, {"type": "stream_complete"}])
    cut = llm(0, calls=[("get_weather", '{"city": "Pa', "call_cut")], stream=True, streamed=True)
    cut.stream_complete, cut.finish_reasons = False, []
    assert h.run(cut) == []  # half-sent arguments are not malformed ones
    # The agent runs the half-sent call anyway: one cause, one violation, from stream_complete.
    used = llm(1, tool_results=[ToolResult("call_cut", "18 C")])
    assert [v.invariant for v in h.run(used)] == ["stream_complete"]
    # Cut after its finish reason, the call was whole: broken arguments are the model's.
    late = llm(2, calls=[("get_weather", '{"city": "Pa', "call_late")], stream=True, streamed=True)
    late.stream_complete = False
    assert [v.invariant for v in h.run(late)] == ["tool_arguments_json"]
