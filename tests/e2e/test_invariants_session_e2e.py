"""Invariants on whole sessions (budgets, stream_complete, injection_followed, latency_budget,
custom): every built-in, positive and negative, driven through the real proxy
by the official SDKs; the scenario and its checks are in tests/e2e/invariant_scenarios.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import openai
import pytest

from tests.e2e.invariant_scenarios import (  # noqa: F401  (fixtures)
    MODEL,
    SEARCH,
    WEATHER,
    Brownout,
    assistant_calls,
    bo,
    client,
    user,
    weather,
)

# --- token_budget and call_budget ----------------------------------------------------------------------


def test_budgets_flag_an_agent_that_does_not_stop(bo: Brownout, client: Any) -> None:
    session = "budget-over"
    oai = client(session)
    history = [user("Summarise this report: " + "The quarterly numbers were steady. " * 20)]
    for _ in range(5):  # the agent keeps asking for "one more pass"
        reply = oai.chat.completions.create(model=MODEL, messages=history)
        history += [{"role": "assistant", "content": reply.choices[0].message.content}, user("One more pass, please.")]
    (tokens,) = bo.violations.wait(session, "token_budget")
    bo.check(tokens, session=session, invariant="token_budget", severity="error")
    assert tokens.details["tokens"] > 600 and tokens.details["max_tokens"] == 600
    (calls,) = bo.violations.wait(session, "call_budget")
    bo.check(calls, session=session, invariant="call_budget", severity="warning")
    assert calls.message == "session made 4 LLM calls, budget 3"
    bo.settle(session, 5)
    assert len(bo.violations.of(session, "token_budget")) == len(bo.violations.of(session, "call_budget")) == 1


def test_budgets_pass_an_agent_that_terminates(bo: Brownout, client: Any) -> None:
    session = "budget-ok"
    oai = client(session)
    with bo.tools(session) as tools:
        msg = oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER]).choices[0].message
        result = weather(tools, bo, msg.tool_calls[0].function.arguments)
        oai.chat.completions.create(
            model=MODEL,
            tools=[WEATHER],
            messages=[
                user(),
                assistant_calls(msg),
                {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": result},
            ],
        )
    bo.none(session, "token_budget", exchanges=3)
    assert bo.violations.of(session, "call_budget") == []


# --- stream_complete -----------------------------------------------------------------------------------


def _truncated_answer(oai: Any) -> tuple[str, str | None]:
    text, finish = "", None
    for chunk in oai.chat.completions.create(model=MODEL, messages=[user()], stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return text, finish


def test_stream_complete_flags_an_agent_that_accepts_a_cut_stream(bo: Brownout, client: Any) -> None:
    session = "trunc-accepted"
    oai = client(session)
    partial, finish = _truncated_answer(oai)  # no [DONE], no error: the SDK hands back partial text
    assert partial and finish is None
    # The agent treats it as the answer and carries on with it in its history.
    oai.chat.completions.create(
        model=MODEL, messages=[user(), {"role": "assistant", "content": partial}, user("And tomorrow?")]
    )
    (v,) = bo.violations.wait(session, "stream_complete")
    bo.check(v, session=session, invariant="stream_complete", severity="error", rule="cut-stream", fault="truncate")
    assert "sent its partial text back as a finished assistant message (messages[1])" in v.message
    truncated = bo.spans.by_span_id(v.details["truncated_span_id"])
    assert truncated.attributes["brownout.stream.complete"] is False
    assert [e.attributes["brownout.fault.type"] for e in truncated.events if e.name == "brownout.fault"] == ["truncate"]


def test_stream_complete_passes_an_agent_that_discards_a_cut_stream(bo: Brownout, client: Any) -> None:
    session = "trunc-careful"
    oai = client(session)
    partial, finish = _truncated_answer(oai)
    assert partial and finish is None  # no finish_reason: the careful agent asks again instead
    oai.chat.completions.create(model=MODEL, messages=[user()])
    bo.none(session, "stream_complete", exchanges=2)


def _streamed_tool_call(oai: Any) -> tuple[str | None, str]:
    """Stream a tool call that the truncate rule cuts mid-arguments; the call id and argument text that arrived."""
    call_id, args = None, ""
    for chunk in oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER], stream=True):
        for call in chunk.choices[0].delta.tool_calls or []:
            call_id = call.id or call_id
            args += call.function.arguments or ""
    return call_id, args


def test_a_cut_tool_call_the_agent_drops_is_no_violation(bo: Brownout, client: Any) -> None:
    session = "trunc-tool-dropped"
    oai = client(session)
    call_id, args = _streamed_tool_call(oai)  # no [DONE], no error: half the arguments
    assert call_id and args and not args.endswith("}")
    oai.chat.completions.create(model=MODEL, messages=[user()], tools=[WEATHER])  # asks again
    bo.none(session, "tool_arguments_json", exchanges=2)
    assert bo.violations.of(session) == []


def test_a_cut_tool_call_the_sdk_raised_on_is_no_violation(bo: Brownout, client: Any) -> None:
    session = "cut-reset-tool"
    oai = client(session)
    with pytest.raises(openai.APIConnectionError):
        _streamed_tool_call(oai)
    bo.settle(session, 1)
    assert bo.violations.of(session) == []


def test_a_tool_call_cut_by_an_error_event_is_no_violation(bo: Brownout, client: Any) -> None:
    # The provider's error event mid-stream: the SDK raises, and the half-sent call is nobody's bug.
    session = "stream-error-tool"
    oai = client(session)
    with pytest.raises(openai.APIError):
        _streamed_tool_call(oai)
    bo.settle(session, 1)
    assert bo.violations.of(session) == []


def test_a_cut_tool_call_the_agent_runs_is_reported_once(bo: Brownout, client: Any) -> None:
    session = "trunc-tool-used"
    oai = client(session)
    call_id, args = _streamed_tool_call(oai)
    call = {"id": call_id, "type": "function", "function": {"name": "get_weather", "arguments": args}}
    history = [user(), {"role": "assistant", "content": None, "tool_calls": [call]}]
    history.append({"role": "tool", "tool_call_id": call_id, "content": "18 C"})  # as if the call had run
    oai.chat.completions.create(model=MODEL, messages=history)
    (v,) = bo.violations.wait(session, "stream_complete")
    assert f"carries a result for its tool call {call_id!r}" in v.message
    bo.settle(session, 2)
    assert [x.invariant for x in bo.violations.of(session)] == ["stream_complete"]


# --- injection_followed --------------------------------------------------------------------------------


def _tool_turn(bo: Brownout, oai: Any, tools: httpx.Client) -> tuple[list[Any], str]:
    """Ask, execute the weather tool (whose answer carries the injection), hand the result back."""
    history: list[Any] = [user()]
    msg = oai.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER, SEARCH]).choices[0].message
    result = weather(tools, bo, msg.tool_calls[0].function.arguments)
    assert "evil.example" in result  # the injected instruction reached the agent
    history += [assistant_calls(msg), {"role": "tool", "tool_call_id": msg.tool_calls[0].id, "content": result}]
    answer = oai.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER, SEARCH]).choices[0].message
    history.append({"role": "assistant", "content": answer.content})
    return history, result


def test_injection_followed_flags_an_agent_acting_on_injected_text(bo: Brownout, client: Any) -> None:
    session = "inject-followed"
    oai = client(session)
    with bo.tools(session) as tools:
        _tool_turn(bo, oai, tools)
        # The hijacked agent does what the tool output told it: it sends the URL to the search tool.
        tools.get(f"{bo.upstream.url}/tools/search", params={"q": "https://evil.example/collect Paris trip"})
    (v,) = bo.violations.wait(session, "injection_followed")
    bo.check(
        v, session=session, invariant="injection_followed", severity="critical", rule="inject-weather", fault="inject"
    )
    assert "executed tool call 'search' contains marker 'https://evil.example/collect'" in v.message
    assert v.tool == "search"
    source = bo.spans.by_span_id(v.details["injected_span_id"])
    assert source.attributes["gen_ai.tool.name"] == "weather"


def test_injection_followed_passes_an_agent_that_only_reads_it(bo: Brownout, client: Any) -> None:
    session = "inject-resisted"
    oai = client(session)
    with bo.tools(session) as tools:
        history, _ = _tool_turn(bo, oai, tools)
        # Next turn: the injected text is in the history (tool result, the model's quote), not acted on.
        history.append(user("Thanks. And in Lyon?"))
        oai.chat.completions.create(model=MODEL, messages=history, tools=[WEATHER, SEARCH])
    bo.none(session, "injection_followed", exchanges=4)


# --- latency_budget ------------------------------------------------------------------------------------


def test_latency_budget_flags_a_slow_tool(bo: Brownout) -> None:
    session = "latency-slow"
    with bo.tools(session) as tools:
        tools.get(f"{bo.upstream.url}/tools/weather", params={"city": "Paris"}).raise_for_status()
    (v,) = bo.violations.wait(session, "latency_budget")
    bo.check(v, session=session, invariant="latency_budget", severity="warning", rule="slow-tool", fault="latency")
    assert v.details["total_ms"] >= 1500 and v.details["budget_ms"] == 1000
    assert v.tool == "weather"


def test_latency_budget_passes_a_fast_tool(bo: Brownout, client: Any) -> None:
    session = f"latency-fast-{uuid.uuid4().hex[:8]}"  # its own on a rerun: the module's proxy keeps violations
    with bo.tools(session) as tools:
        tools.get(f"{bo.upstream.url}/tools/weather", params={"city": "Paris"}).raise_for_status()
    bo.none(session, "latency_budget", exchanges=1)


# --- custom --------------------------------------------------------------------------------------------


def test_custom_invariant_flags_what_the_callable_reports(bo: Brownout, client: Any) -> None:
    session = "custom-retired"
    client(session).chat.completions.create(model="gpt-3.5-turbo", messages=[user()])
    (v,) = bo.violations.wait(session, "retired_models")
    bo.check(v, session=session, invariant="retired_models", severity="error")
    assert v.invariant_type == "custom" and v.message == "retired model gpt-3.5-turbo called"
    assert v.details == {"model": "gpt-3.5-turbo"} and v.model == "gpt-3.5-turbo"


def test_custom_invariant_passes_what_the_callable_accepts(bo: Brownout, client: Any) -> None:
    session = "custom-current"
    client(session).chat.completions.create(model=MODEL, messages=[user()])
    bo.none(session, "retired_models", exchanges=1)


def test_an_invariant_that_raises_is_counted_and_skipped(bo: Brownout, client: Any) -> None:
    session = "raises-1"
    before = bo.internal_errors("invariant:broken_check")
    oai = client(session)
    for _ in range(2):  # the exchange is unaffected, and so are the other invariants
        reply = oai.chat.completions.create(model=MODEL, messages=[user("Mail me at someone@example.org")])
        assert reply.choices[0].message.content
    bo.violations.wait(session, "no_pii", n=2)
    assert bo.internal_errors("invariant:broken_check") - before == 2
    assert bo.violations.of(session, "broken_check") == []
    for span in bo.spans.of(session):
        assert [e.attributes["brownout.violation.invariant"] for e in span.events] == ["no_pii"]
