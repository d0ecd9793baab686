"""Which agent span a wire call belongs to: by trace context up the tree, else by time, provider, model, tool."""

from __future__ import annotations

from brownout.core.agent_spans import AgentSpan
from brownout.core.exchange import Exchange, Timings
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import BY_CONTEXT, WireCall, parse_traceparent
from brownout.core.span_match import join_by_context, join_by_time

T = "ab" * 16


def agent(n: int, op: str | None, start: float, end: float, **kw: object) -> AgentSpan:
    return AgentSpan(
        T, f"{n:016x}", kw.pop("parent", None), f"{op} {n}", int(start * 1e9), int(end * 1e9), genai=op is not None,
        operation=op, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def call(kind: str = "llm", start: float = 10.0, end: float = 11.0, **kw: object) -> WireCall:
    return WireCall("x", "s", kind, T, "f" * 16, start, end, **kw)  # type: ignore[arg-type]


def test_time_wants_the_same_kind_containing_the_call() -> None:
    chat = agent(1, "chat", 9.9, 11.2)
    tool = agent(2, "execute_tool", 9.0, 12.0)
    assert join_by_time(call("llm"), [tool, chat]) is chat
    assert join_by_time(call("tool"), [tool, chat]) is tool
    assert join_by_time(call("llm", 12.0, 13.0), [chat]) is None  # after it ended
    assert join_by_time(call("llm", 9.5, 11.0), [chat], skew_s=0.1) is None  # began before it
    assert join_by_time(call("llm", 9.8, 11.0), [chat], skew_s=0.25) is chat  # within the clocks' skew


def test_time_prefers_the_model_then_the_tightest_span() -> None:
    wide = agent(1, "chat", 5.0, 20.0, request_model="gpt-4o-mini")
    tight = agent(2, "chat", 9.5, 11.5, request_model="claude-3")
    assert join_by_time(call(model="gpt-4o-mini"), [tight, wide]) is wide
    assert join_by_time(call(model="o3"), [wide, tight]) is tight


def test_time_prefers_a_span_no_call_was_joined_to_yet() -> None:
    """Two agents' calls at once: the tighter span is taken by the first call, the second gets the other."""
    mine = agent(1, "chat", 9.0, 12.0)
    theirs = agent(2, "chat", 9.8, 11.2)
    assert join_by_time(call(), [mine, theirs]) is theirs
    assert join_by_time(call(), [mine, theirs], taken={theirs.span_id}) is mine
    assert join_by_time(call(), [theirs], taken={theirs.span_id}) is theirs  # taken is a preference, not a rule
    other = AgentSpan("cd" * 16, f"{3:016x}", None, "chat 3", int(9.0e9), int(12.0e9), genai=True, operation="chat")
    # the trace this client's last call joined wins over a tighter span of another agent's trace
    assert join_by_time(call(), [other, theirs], trace_id=other.trace_id) is other


def test_time_rules_out_another_provider_and_ranks_tool_names() -> None:
    gemini = agent(1, "chat", 9.0, 12.0, provider="gcp.gemini")
    assert join_by_time(call(provider="openai"), [gemini]) is None
    assert join_by_time(call(provider="gemini"), [gemini]) is gemini  # gcp.gemini holds gemini
    weather = agent(2, "execute_tool", 9.0, 12.0, tool_name="get_weather")
    search = agent(3, "execute_tool", 9.5, 11.5, tool_name="search")
    assert join_by_time(call("tool", tool_name="weather"), [search, weather]) is weather


def test_trace_context_climbs_to_the_nearest_genai_span() -> None:
    chat = agent(1, "chat", 0, 2)
    spans = {chat.span_id: chat}
    parents = {f"{9:016x}": chat.span_id, chat.span_id: None}  # an HTTP client span under the chat span
    assert join_by_context(f"{9:016x}", spans, parents, "llm") is chat
    assert join_by_context(f"{9:016x}", spans, parents, "tool") is None
    loop = {"a": "b", "b": "a"}
    assert join_by_context("a", {}, loop, "llm") is None  # bad data cannot hang it


def test_a_joined_trace_finds_a_calls_span_by_context_else_by_time() -> None:
    run = agent(1, "invoke_agent", 0, 30)
    chat = agent(2, "chat", 9, 12, parent=run.span_id)
    trace = JoinedTrace(T, [run, chat], parents={run.span_id: None, chat.span_id: run.span_id})
    by_context = call(agent_span_id=run.span_id, joined_by=BY_CONTEXT)  # it named the run, not a chat span
    assert trace.agent_span_of(by_context) is chat
    assert trace.within(run)(chat.span_id) and not trace.within(chat)(run.span_id)


def test_an_exchange_is_matched_like_a_wire_call() -> None:
    ex = Exchange(id="x", session="s", operation="chat", model="gpt-4o", gen_ai_provider="openai")
    ex.timings = Timings(start=10.0, end=11.0)
    chat = agent(1, "chat", 9.9, 11.1, provider="openai", request_model="gpt-4o")
    assert join_by_time(ex, [chat]) is chat


def test_traceparent() -> None:
    assert parse_traceparent(f"00-{T}-{'1' * 16}-01") == (T, "1" * 16)
    assert parse_traceparent(f"00-{'0' * 32}-{'1' * 16}-01") is None
    assert parse_traceparent("garbage") is None and parse_traceparent(None) is None


def test_the_proxy_waits_for_the_span_that_holds_the_call_not_an_earlier_one_within_the_skew() -> None:
    """A second model call ends 180 ms after the first call's span: within the skew, but not its call."""
    import asyncio

    from brownout.core.guard import Guard
    from brownout.proxy.agent_config import AgentSpansConfig
    from brownout.proxy.agent_join import AgentJoin

    released: list[Exchange] = []

    async def run() -> None:
        join = AgentJoin(
            AgentSpansConfig(join_wait_s=5), guard=Guard(strict=True), release=released.append, judge=print
        )
        first = agent(1, "chat", 10.0, 10.1, request_model="gpt-4o")
        join.receive([first], "receiver")
        ex = Exchange(id="x2", session="s", operation="chat", model="gpt-4o")
        ex.timings = Timings(start=10.20, end=10.28)
        assert join.admit(ex) is True and ex.agent_span_id is None  # waits: the first span is not it
        second = agent(2, "chat", 10.15, 10.3, request_model="gpt-4o")
        join.receive([second], "receiver")
        assert released == [ex] and ex.agent_span_id == second.span_id

    asyncio.run(run())
