"""missing_span: wire calls the agent's trace does not account for, and agent LLM spans the wire never saw."""

from __future__ import annotations

from tests.agentspans.traces import agent, invariant, judge, trace, wire

RUN = agent(1, "invoke_agent", 0, 30)
CHAT = agent(2, "chat", 5, 7, parent=1, request_model="gpt-4o")


def test_a_wire_call_without_a_span() -> None:
    covered = wire(1, "llm", 5.2, 6.8, model="gpt-4o")  # found by time inside the chat span
    bare = wire(2, "llm", 10, 11, model="gpt-4o")
    (v,) = judge(invariant(type="missing_span"), trace([RUN, CHAT], [covered, bare]))
    assert (v.exchange_id, v.span_id) == ("x2", bare.span_id)
    assert v.message == "LLM call gpt-4o (exchange x2) has no span in the agent's trace"


def test_an_agent_llm_span_without_a_wire_call() -> None:
    (v,) = judge(invariant(type="missing_span"), trace([RUN, CHAT], []))
    assert (v.trace_id, v.span_id, v.exchange_id) == (CHAT.trace_id, CHAT.span_id, None)
    assert "has no call on the wire: it went around brownout" in v.message
    assert judge(invariant(type="missing_span", agent_llm_spans=False), trace([RUN, CHAT], [])) == []


def test_an_uninstrumented_agent_is_not_missing_spans() -> None:
    bare = wire(1, "tool", 10, 11, tool_name="weather")
    assert judge(invariant(type="missing_span"), trace([], [bare], instrumented=False)) == []
    (v,) = judge(invariant(type="missing_span", only_when_instrumented=False), trace([], [bare], instrumented=False))
    assert "tool call 'weather'" in v.message
    assert judge(invariant(type="missing_span", wire_calls=["llm"]), trace([], [bare])) == []


def test_a_span_a_call_of_another_trace_could_belong_to_did_not_go_around() -> None:
    """Concurrent agents without trace context: the join may give a call to the other agent's span."""
    joined = trace([RUN, CHAT], [])
    joined.wire_near = lambda span: span.start_s <= 6.0 <= span.end_s  # a call at 6.0 s, joined elsewhere
    assert judge(invariant(type="missing_span"), joined) == []
