from __future__ import annotations

import json

from brownout.core.exchange import FaultRecord
from tests.invariants.builders import Harness, llm, tool

RATE_LIMIT = FaultRecord("rl", "http_error", {"status": 429})


def err(t: float, *, retry_after: str | None = "2", status: int | None = 429, **kw):
    headers = {"retry-after": retry_after} if retry_after else {}
    return llm(
        t,
        dur=0.05,
        status=status,
        headers=headers,
        usage=None,
        error_type="rate_limit_exceeded",
        faults=[RATE_LIMIT],
        **kw,
    )


def test_retry_storm_after_429_ignoring_retry_after() -> None:
    h = Harness([{"type": "retry_discipline", "max_retries": 3}])
    found = h.run(err(0))
    for i in range(1, 7):  # hammering every 100 ms
        found += h.run(err(i * 0.1, retry_count=i))
    checks = [v.details["check"] for v in found]
    assert checks == ["retry_after", "max_retries", "storm"]
    assert "asked for retry-after 2 s" in found[0].message
    assert all(v.rule == "rl" and v.fault == "http_error" for v in found)


def test_sdk_like_client_honours_retry_after_and_gives_up() -> None:
    h = Harness([{"type": "retry_discipline", "max_retries": 2}])
    assert h.run(err(0, retry_after="1")) == []
    assert h.run(err(1.05, retry_after="1", retry_count=1)) == []  # 1.0 s after the 429 ended
    assert h.run(llm(2.2, retry_count=2)) == []  # success ends the chain
    assert h.run(err(10, retry_after=None, status=503)) == []
    assert h.run(err(10.6, retry_after=None, status=503)) == []  # backed off 0.55 s
    assert h.run(llm(12)) == []


def test_no_backoff_after_reset_and_retry_after_ms() -> None:
    h = Harness([{"type": "retry_discipline"}])
    assert h.run(err(0, retry_after=None, status=None)) == []  # connection reset
    (v,) = h.run(llm(0.06))
    assert v.details["check"] == "backoff"
    h = Harness([{"type": "retry_discipline"}])
    early = err(0, retry_after=None)
    early.response_headers = {"retry-after-ms": "500"}
    h.run(early)
    assert h.run(llm(0.6)) == []


def test_concurrent_requests_and_other_endpoints_are_not_retries() -> None:
    h = Harness([{"type": "retry_discipline", "min_backoff_s": 1}])
    assert h.run(err(0, retry_after=None)) == []
    assert h.run(llm(0.01)) == []  # started before the 429 ended: concurrent, not a retry
    emb = llm(0.06, operation="embeddings", path="/v1/embeddings")
    assert h.run(emb) == []  # a different endpoint
    assert h.run(llm(500)) == []  # long after: a new chain, not a retry


def test_retry_count_header_alone_signals_too_many_retries() -> None:
    h = Harness([{"type": "retry_discipline", "max_retries": 2}])
    (v,) = h.run(llm(0, retry_count=5))
    assert v.details["check"] == "max_retries" and "5 retries" in v.message


def mcp_list(t: float):
    ex = tool("unused", {}, t, operation="tools/list", mcp_method="tools/list", tool_name=None, tool_calls=[])
    ex.request_body = '{"jsonrpc": "2.0", "id": 9, "method": "tools/list"}'
    return ex


def test_mcp_answers_in_http_200_are_not_failures() -> None:
    h = Harness([{"type": "retry_discipline"}])
    # A tool that reports an error (isError) and a JSON-RPC invalid_params are the server's answers.
    assert h.run(tool("get_weather", {"city": "Paris"}, 0, error_type="tool_error")) == []
    assert h.run(mcp_list(0.06)) == []
    assert h.run(tool("get_weather", {"city": "Lyon"}, 0.12)) == []
    assert h.run(tool("search", {"q": 1}, 0.2, error_type="invalid_params")) == []
    assert h.run(tool("search", {"q": "x"}, 0.26)) == []


def test_mcp_retries_are_keyed_by_method_and_tool() -> None:
    h = Harness([{"type": "retry_discipline"}])
    assert h.run(tool("get_weather", {"city": "Paris"}, 0, error_type="internal_error")) == []
    assert h.run(mcp_list(0.06)) == []  # another method at the same URL: not a retry
    assert h.run(tool("search", {"q": "x"}, 0.08)) == []  # another tool: not a retry
    (v,) = h.run(tool("get_weather", {"city": "Paris"}, 0.1))
    assert v.details["check"] == "backoff"
    assert v.message.startswith("retried tools/call get_weather (POST tools.local/mcp) 0.050 s after a failure")


def test_mcp_a_call_with_other_arguments_is_no_retry() -> None:
    h = Harness([{"type": "retry_discipline"}])
    assert h.run(tool("get_weather", {"city": "Paris"}, 0, error_type="internal_error")) == []
    assert h.run(tool("get_weather", {"city": "Lyon"}, 0.06)) == []  # the same tool for another city
    # The same call again (its progress token in _meta aside): the retry, still without backoff.
    again = tool("get_weather", {"city": "Paris"}, 0.1)
    body = json.loads(again.request_body)
    body["params"]["_meta"] = {"progressToken": 7}
    again.request_body = json.dumps(body)
    (v,) = h.run(again)
    assert v.details["check"] == "backoff" and "0.050 s after a failure" in v.message


def cut(t: float, content: str = "hello", **kw):
    """A streamed chat answer that ended before its terminal event, the model not finished."""
    return llm(t, dur=0.05, messages=[("user", content)], stream=True, stream_complete=False, finish_reasons=[], **kw)


def test_resending_after_cut_streams_is_judged_like_after_5xx() -> None:
    def checks(first, again) -> list[str]:
        h = Harness([{"type": "retry_discipline"}])
        found = h.run(first(0))
        for i in range(1, 6):  # five re-sends, each 10 ms after the last answer ended
            found += h.run(again(i * 0.06) if i < 5 else llm(i * 0.06))
        return [v.details["check"] for v in found]

    after_cuts = checks(cut, cut)
    assert after_cuts == checks(
        lambda t: err(t, retry_after=None, status=503), lambda t: err(t, retry_after=None, status=503)
    )
    assert after_cuts == ["backoff", "max_retries", "storm"]


def test_after_a_cut_stream_the_next_turn_is_no_retry() -> None:
    h = Harness([{"type": "retry_discipline"}])
    assert h.run(cut(0, "Tell me about Paris.")) == []
    # at once, but another request: the agent went on with the partial answer
    assert h.run(cut(0.06, "Tell me about Paris. Go on.")) == []
    (v,) = h.run(cut(0.12, "Tell me about Paris. Go on."))  # that one again, at once: a retry
    assert v.details["check"] == "backoff" and "0.010 s after a failure" in v.message
    # the same request with other volatile fields (user, metadata) is the same request
    h = Harness([{"type": "retry_discipline"}])
    first = cut(0)
    h.run(first)
    again = cut(0.06)
    again.request_body = again.request_body[:-1] + ', "user": "u-2", "metadata": {"n": 2}}'
    assert [v.details["check"] for v in h.run(again)] == ["backoff"]


def test_a_stream_missing_only_its_terminal_event_is_no_failure() -> None:
    h = Harness([{"type": "retry_discipline"}])
    assert h.run(llm(0, dur=0.05, stream=True, stream_complete=False)) == []  # finish_reason "stop" arrived
    assert h.run(llm(0.06, dur=0.05)) == []


def test_codex_cli_backoff_after_cut_streams_passes() -> None:
    # Codex CLI re-sends a cut stream after 200 ms x 2^(n-1), jittered by +-10%: at the low end here.
    h = Harness([{"type": "retry_discipline"}])
    t, found = 0.0, h.run(cut(0))
    for wait in (0.18, 0.36):
        t += 0.05 + wait
        found += h.run(cut(t))
    found += h.run(llm(t + 0.05 + 0.72))  # the third retry, within max_retries, gets the whole answer
    assert found == []
