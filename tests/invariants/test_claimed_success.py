"""claimed_success: a success claimed over a call that failed on the wire and was not retried successfully."""

from __future__ import annotations

from brownout.core.agent_spans import STATUS_ERROR, STATUS_OK
from tests.agentspans.traces import agent, invariant, judge, trace, wire

RUN = agent(1, "invoke_agent", 0, 30)
TOOL = agent(2, "execute_tool", 10, 12, parent=1, tool_name="get_weather")


def test_a_run_that_ends_well_over_a_failed_tool_call() -> None:
    call = wire(1, "tool", 10.5, 11.5, joined=TOOL, tool_name="weather", failed=True, faults=("http_error",))
    (v,) = judge(invariant(type="claimed_success"), trace([RUN, TOOL], [call]))
    assert v.invariant == "claimed_success" and v.exchange_id == "x1" and v.span_id == call.span_id
    assert "reported success ('invoke_agent 1'" in v.message and "tool call 'weather' (exchange x1) failed" in v.message
    assert v.details["claimed_by"] == [RUN.span_id] and v.details["agent_span_id"] == TOOL.span_id
    assert v.fault == "http_error"


def test_a_fault_counts_even_on_a_200_unless_it_only_slowed_the_call() -> None:
    cut = wire(1, "llm", 5, 6, model="gpt-4o", faults=("truncate",))
    slow = wire(2, "llm", 7, 8, model="gpt-4o", faults=("latency",))
    # the slowed call after it went to the same model and succeeded: the cut one was retried
    assert judge(invariant(type="claimed_success"), trace([RUN], [cut, slow])) == []
    late_cut = wire(3, "llm", 9, 10, model="gpt-4o", faults=("truncate",))
    (v,) = judge(invariant(type="claimed_success"), trace([RUN], [slow, late_cut]))
    assert v.exchange_id == "x3" and "was faulted (truncate)" in v.message


def test_a_successful_retry_clears_the_failure() -> None:
    first = wire(1, "tool", 10.1, 10.3, joined=TOOL, tool_name="weather", failed=True)
    retry = wire(2, "tool", 10.6, 11.0, joined=TOOL, tool_name="weather")
    assert judge(invariant(type="claimed_success"), trace([RUN, TOOL], [first, retry])) == []


def test_no_claim_no_violation() -> None:
    failed_run = agent(1, "invoke_agent", 0, 30, status=STATUS_ERROR)
    call = wire(1, "tool", 10.5, 11.5, joined=TOOL, tool_name="weather", failed=True)
    assert judge(invariant(type="claimed_success"), trace([failed_run, TOOL], [call])) == []
    chat = agent(1, "chat", 0, 30)  # not an agent run, and no OK status
    assert judge(invariant(type="claimed_success"), trace([chat, TOOL], [call])) == []
    assert judge(invariant(type="claimed_success", unset_claims=[]), trace([RUN, TOOL], [call])) == []


def test_an_ok_step_claims_too() -> None:
    ok_tool = agent(2, "execute_tool", 10, 12, parent=1, status=STATUS_OK)
    call = wire(1, "tool", 10.5, 11.5, joined=ok_tool, tool_name="weather", failed=True)
    (v,) = judge(invariant(type="claimed_success", unset_claims=[]), trace([RUN, ok_tool], [call]))
    assert v.details["claimed_by"] == [ok_tool.span_id]


def test_a_failure_the_agent_recorded_is_not_papered_over() -> None:
    failed_tool = agent(2, "execute_tool", 10, 12, parent=1, status=STATUS_ERROR)
    call = wire(1, "tool", 10.5, 11.5, joined=failed_tool, tool_name="weather", failed=True)
    assert judge(invariant(type="claimed_success"), trace([RUN, failed_tool], [call])) == []
    (v,) = judge(invariant(type="claimed_success", count_recorded=True), trace([RUN, failed_tool], [call]))
    assert v.details["claimed_by"] == [RUN.span_id]


def test_an_unjoined_call_depends_on_the_run_it_falls_inside() -> None:
    inside = wire(1, "llm", 5, 6, model="gpt-4o", failed=True)
    outside = wire(2, "llm", 40, 41, model="o3", failed=True)
    (v,) = judge(invariant(type="claimed_success"), trace([RUN], [inside, outside]))
    assert v.exchange_id == "x1"
