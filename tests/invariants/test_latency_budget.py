from __future__ import annotations

from tests.invariants.builders import Harness, llm, tool


def test_slow_exchange_and_slow_first_chunk_are_flagged() -> None:
    h = Harness([{"type": "latency_budget", "total_ms": 2000, "ttfc_ms": 500}])
    slow = llm(0, dur=3.0)
    slow.timings.first_client_byte = slow.timings.start + 0.1
    (total,) = h.run(slow)
    assert total.invariant == "latency_budget" and total.severity == "warning"
    assert "3000 ms, budget 2000 ms" in total.message
    assert total.details["total_ms"] == 3000.0
    found = h.run(llm(10, dur=1.5))  # ttfc 750 ms
    assert [v.message for v in found] == ["time to first chunk 750 ms, budget 500 ms"]


def test_fast_exchanges_pass_and_filters_apply() -> None:
    h = Harness([{"type": "latency_budget", "total_ms": 200, "providers": ["openai"], "operations": ["chat"]}])
    assert h.run(llm(0, dur=0.1)) == []
    slow_tool = tool("slow_tool", {}, 2)
    slow_tool.timings.end = slow_tool.timings.start + 5
    assert h.run(slow_tool) == []  # mcp: not in providers
    assert len(h.run(llm(10, dur=0.3))) == 1
