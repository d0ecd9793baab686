from __future__ import annotations

import pytest

from brownout.core.guard import Guard
from tests.invariants.builders import Harness, llm


def test_custom_callable_returning_dicts() -> None:
    h = Harness([{"type": "custom", "name": "retired_models", "callable": "tests.invariants.custom_checks:no_gpt3"}])
    assert h.run(llm(0)) == []
    (v,) = h.run(llm(1, model="gpt-3.5-turbo"))
    assert v.invariant == "retired_models" and v.invariant_type == "custom"
    assert v.severity == "warning" and v.message == "gpt-3 is retired" and v.details == {"model": "gpt-3"}


def test_custom_callable_with_params_returning_a_string() -> None:
    h = Harness(
        [
            {
                "type": "custom",
                "callable": "tests.invariants.custom_checks:max_session_calls",
                "params": {"n": 2},
                "severity": "info",
            }
        ]
    )
    assert h.run_all(llm(0), llm(1)) == []
    (v,) = h.run(llm(2))
    assert v.message == "more than 2 calls" and v.severity == "info"


def test_unimportable_callable_is_a_load_error() -> None:
    with pytest.raises(ValueError, match="cannot be imported"):
        Harness([{"type": "custom", "callable": "tests.invariants.custom_checks:nope"}])
    with pytest.raises(ValueError, match="callable"):
        Harness([{"type": "custom", "callable": "not a spec"}])


def test_raising_custom_callable_is_counted_and_skipped() -> None:
    h = Harness(
        [
            {"type": "custom", "name": "flaky", "callable": "tests.invariants.custom_checks:broken"},
            {"type": "token_budget", "max_tokens": 1},
        ],
        guard=Guard(),
    )
    found = h.run(llm(0))
    assert [v.invariant for v in found] == ["token_budget"]  # the others still ran
    h.run(llm(1))
    assert h.runner.guard.snapshot() == {"invariant:flaky": 2}
    assert len(h.exporter.get_finished_spans()) == 2
