"""span_mismatch: the agent's span and the wire disagree on the model, the tokens or a tool call's arguments."""

from __future__ import annotations

from tests.agentspans.traces import agent, invariant, judge, tool_call, trace, wire

RUN = agent(1, "invoke_agent", 0, 30)


def test_models_that_disagree_and_dated_versions_that_agree() -> None:
    chat = agent(2, "chat", 5, 7, parent=1, request_model="gpt-4o")
    other = wire(1, "llm", 5.2, 6.8, joined=chat, model="gpt-4o-mini-2024-07-18")
    dated = agent(3, "chat", 8, 9, parent=1, response_model="gpt-4o-2024-08-06")
    same = wire(2, "llm", 8.1, 8.9, joined=dated, model="gpt-4o")
    found = judge(invariant(type="span_mismatch"), trace([RUN, chat, dated], [other, same]))
    assert [v.exchange_id for v in found] == ["x1"]
    assert "says model 'gpt-4o', the wire 'gpt-4o-mini-2024-07-18'" in found[0].message
    assert found[0].details["agent_span_id"] == chat.span_id
    assert judge(invariant(type="span_mismatch", model=False), trace([RUN, chat], [other])) == []


def test_tokens_are_summed_over_the_sdks_retries_within_a_tolerance() -> None:
    chat = agent(2, "chat", 5, 9, parent=1, input_tokens=100, output_tokens=40)
    refused = wire(1, "llm", 5.1, 5.2, joined=chat, failed=True)
    answered = wire(2, "llm", 6, 8.5, joined=chat, input_tokens=100, output_tokens=42)
    assert judge(invariant(type="span_mismatch"), trace([RUN, chat], [refused, answered])) == []
    (v,) = judge(invariant(type="span_mismatch", token_tolerance_pct=1), trace([RUN, chat], [refused, answered]))
    assert "reports 40 output tokens, the wire 42 over 2 call(s)" in v.message


def test_arguments_the_agent_ran_are_not_what_the_model_asked_for() -> None:
    asked = tool_call("call_7", "get_weather", '{"city": "Paris", "unit": "c"}')
    chat = wire(1, "llm", 5, 6, model="gpt-4o", tool_calls=(asked,))
    same = agent(2, "execute_tool", 7, 8, tool_call_id="call_7", tool_arguments='{"unit":"c","city":"Paris"}')
    assert judge(invariant(type="span_mismatch"), trace([same], [chat])) == []
    ran = agent(2, "execute_tool", 7, 8, tool_call_id="call_7", tool_arguments='{"city": "Lyon"}')
    (v,) = judge(invariant(type="span_mismatch"), trace([ran], [chat]))
    assert "ran tool call 'call_7' (get_weather) with other arguments" in v.message and v.exchange_id == "x1"
    assert judge(invariant(type="span_mismatch", arguments=False), trace([ran], [chat])) == []
