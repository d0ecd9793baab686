"""realtime_session_budget: tokens over the session's generations, the session's duration; once each."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from brownout.invariants.config import parse_invariants
from tests.invariants.builders import Harness, realtime_generation, realtime_session


def test_tokens_are_summed_over_a_sessions_generations() -> None:
    h = Harness([{"type": "realtime_session_budget", "max_tokens": 100}])
    assert h.run(realtime_generation(0, usage=(30, 12))) == []
    assert h.run(realtime_generation(1, usage=(30, 12))) == []
    (v,) = h.run(realtime_generation(2, usage=(30, 12)))
    assert "realtime session sess_1 used 126 tokens, budget 100" in v.message
    assert h.run(realtime_generation(3, usage=(30, 12))) == []  # once
    assert h.run(realtime_generation(4, sid="sess_2", usage=(30, 12))) == []  # another session starts afresh


def test_duration_is_the_sessions_and_is_flagged_while_it_runs() -> None:
    h = Harness([{"type": "realtime_session_budget", "max_duration_s": 10}])
    assert h.run(realtime_generation(0)) == []
    (v,) = h.run(realtime_generation(11))  # still open, already over
    assert "lasted 11.5 s, budget 10 s" in v.message
    assert h.run(realtime_session(-0.5, 20)) == []  # reported once; the session's end closes its books
    (late,) = Harness([{"type": "realtime_session_budget", "max_duration_s": 10}]).run_all(realtime_session(0, 12))
    assert "lasted 12.0 s" in late.message  # a session with no generation is judged when it ends


def test_a_budget_is_required() -> None:
    with pytest.raises(ValidationError, match="max_duration_s and/or max_tokens"):
        parse_invariants([{"type": "realtime_session_budget"}])
