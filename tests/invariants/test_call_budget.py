from __future__ import annotations

from tests.invariants.builders import Harness, llm, tool


def test_too_many_llm_calls_and_too_long() -> None:
    h = Harness([{"type": "call_budget", "max_calls": 3, "max_duration_s": 60}])
    assert h.run_all(llm(0), tool("t", {}, 1), llm(2), llm(3)) == []  # tool calls do not count
    (calls,) = h.run(llm(4))
    assert calls.message == "session made 4 LLM calls, budget 3"
    (duration,) = h.run(llm(100))
    assert "budget 60 s" in duration.message
    assert h.run(llm(200)) == []


def test_within_budget_and_count_all() -> None:
    h = Harness([{"type": "call_budget", "max_calls": 2, "count": "all"}])
    assert h.run_all(llm(0), tool("t", {}, 1)) == []
    assert len(h.run(tool("t", {"x": 1}, 2))) == 1
    ok = Harness([{"type": "call_budget", "max_calls": 5}])
    assert ok.run_all(*(llm(i) for i in range(5))) == []
