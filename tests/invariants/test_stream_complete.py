from __future__ import annotations

from brownout.core.exchange import FaultRecord, ToolResult
from tests.invariants.builders import Harness, llm, tool

TRUNCATE = FaultRecord("cut", "truncate", {"after_events": 5, "terminal": False})
PARTIAL = "The capital of France is Par"


def truncated(t: float = 0, **kw):
    return llm(t, stream=True, streamed=True, stream_complete=False, text=PARTIAL, faults=[TRUNCATE], **kw)


def test_partial_text_sent_back_as_a_finished_assistant_message() -> None:
    h = Harness([{"type": "stream_complete"}])
    cut = truncated(finish_reasons=[])
    assert h.run(cut) == []
    nxt = llm(2, messages=[("user", "capital of France?"), ("assistant", PARTIAL), ("user", "and Spain?")])
    (v,) = h.run(nxt)
    assert f"stream {cut.id} ended without its terminal event" in v.message
    assert "messages[1]" in v.message and v.exchange_id == nxt.id
    assert v.rule == "cut" and v.fault == "truncate"  # the truncation fault is the cause
    assert h.run(llm(3, messages=[("assistant", PARTIAL)])) == []  # reported once


def test_retrying_the_request_instead_passes() -> None:
    h = Harness([{"type": "stream_complete"}])
    h.run(truncated(finish_reasons=[]))
    assert h.run(llm(2, messages=[("user", "capital of France?")])) == []
    complete = llm(3, stream=True, streamed=True, stream_complete=True, text=PARTIAL)
    h2 = Harness([{"type": "stream_complete"}])
    h2.run(complete)
    assert h2.run(llm(4, messages=[("assistant", PARTIAL)])) == []


def test_cut_after_finish_reason_is_not_partial_unless_configured() -> None:
    h = Harness([{"type": "stream_complete"}])
    h.run(truncated())  # finish_reasons=["stop"] arrived: content was complete
    assert h.run(llm(2, messages=[("assistant", PARTIAL)])) == []
    strict = Harness([{"type": "stream_complete", "ignore_if_finished": False}])
    strict.run(truncated())
    assert len(strict.run(llm(2, messages=[("assistant", PARTIAL)]))) == 1


def test_tool_call_from_a_truncated_stream_executed() -> None:
    h = Harness([{"type": "stream_complete"}])
    h.run(
        llm(
            0,
            stream=True,
            streamed=True,
            stream_complete=False,
            finish_reasons=[],
            calls=[("get_weather", '{"city": "Os', "call_9")],
        )
    )
    (v,) = h.run(tool("get_weather", {"city": "Os"}, 1, call_id="call_9"))
    assert "executed its tool call 'call_9'" in v.message
    h.run(
        llm(
            3,
            stream=True,
            streamed=True,
            stream_complete=False,
            finish_reasons=[],
            calls=[("get_weather", '{"city": "Os', "call_10")],
        )
    )
    (v,) = h.run(llm(4, tool_results=[ToolResult("call_10", "sunny")]))
    assert "carries a result for its tool call 'call_10'" in v.message
