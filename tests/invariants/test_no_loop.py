from __future__ import annotations

from tests.invariants.builders import Harness, llm, tool


def test_tool_calling_loop_is_flagged_once() -> None:
    h = Harness([{"type": "no_loop", "max_repeats": 3}])
    # The model keeps asking for the same search (argument order and spacing differ: canonicalised).
    args = ['{"q": "weather oslo", "n": 1}', '{"n":1,"q":"weather oslo"}']
    found = [h.run(llm(i, calls=[("search", args[i % 2])])) for i in range(6)]
    assert [len(f) for f in found] == [0, 0, 0, 1, 0, 0]
    v = found[3][0]
    assert "'search' repeated 4 times" in v.message and v.details["source"] == "model"


def test_varied_calls_and_separate_sources_pass() -> None:
    h = Harness([{"type": "no_loop", "max_repeats": 2, "alternation_cycles": 0}])
    for i in range(6):
        assert h.run(llm(i, calls=[("search", f'{{"q": "page {i}"}}')])) == []
    # The model asks, the agent executes: two sequences, so one call each is not a repeat.
    assert h.run(llm(10, calls=[("fetch", '{"u": 1}')])) == []
    assert h.run(tool("fetch", {"u": 1}, 11)) == []
    assert h.run(llm(12, calls=[("fetch", '{"u": 1}')])) == []


def test_window_limits_what_counts() -> None:
    h = Harness([{"type": "no_loop", "max_repeats": 1, "window": 3, "alternation_cycles": 0}])
    assert h.run(tool("a", {}, 0)) == []
    assert h.run_all(tool("b", {}, 1), tool("c", {}, 2), tool("d", {}, 3)) == []
    assert h.run(tool("a", {}, 4)) == []  # the first `a` fell out of the window
    assert len(h.run(tool("a", {}, 5))) == 1


def test_a_b_a_b_alternation() -> None:
    h = Harness([{"type": "no_loop", "max_repeats": 10}])
    calls = [
        tool("open_file", {"p": "x"}, 0),
        tool("close_file", {"p": "x"}, 1),
        tool("open_file", {"p": "x"}, 2),
        tool("close_file", {"p": "x"}, 3),
    ]
    found = h.run_all(*calls)
    assert len(found) == 1 and "alternate" in found[0].message and found[0].details["source"] == "executed"
    other = Harness([{"type": "no_loop", "max_repeats": 10}])
    assert (
        other.run_all(
            tool("open_file", {"p": "x"}, 0),
            tool("close_file", {"p": "x"}, 1),
            tool("open_file", {"p": "y"}, 2),
            tool("close_file", {"p": "y"}, 3),
        )
        == []
    )
