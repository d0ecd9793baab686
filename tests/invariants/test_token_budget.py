from __future__ import annotations

from tests.invariants.builders import Harness, llm


def test_over_budget_session_is_flagged_once() -> None:
    h = Harness([{"type": "token_budget", "max_tokens": 1000}])
    assert h.run(llm(0, usage=(400, 100))) == []
    (v,) = h.run(llm(2, usage=(450, 100)))
    assert "1050 tokens" in v.message and "budget 1000" in v.message
    assert v.session_id == "s1" and v.exchange_id is not None and v.span_id and v.trace_id
    assert h.run(llm(4, usage=(500, 100))) == []  # reported once per session


def test_sessions_are_budgeted_separately() -> None:
    h = Harness([{"type": "token_budget", "max_tokens": 1000}])
    assert h.run(llm(0, usage=(600, 0), session="a")) == []
    assert h.run(llm(1, usage=(600, 0), session="b")) == []
    assert h.run(llm(2, usage=None, session="a")) == []  # no usage reported counts as zero
