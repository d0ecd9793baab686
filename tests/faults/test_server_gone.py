"""server_gone: the server stops answering mid-session and stays gone (for down_s, or the rest of the run)."""

from __future__ import annotations

from brownout.faults.base import Reset
from brownout.faults.server_gone import ServerGoneFault, ServerGoneParams
from tests.faults.engine_support import Clock, engine, ex, run


def call(i: int, host: str = "tools.local", **kw: object):
    return ex(
        i, provider="mcp", operation="tools/call", mcp_method="tools/call", host=host, port=8000, model=None, **kw
    )


def test_gone_for_down_s_whatever_the_schedule_then_back() -> None:
    clock = Clock()
    rule = {"name": "crash", "match": {"mcp_method": "tools/call"}, "fault": {"type": "server_gone", "down_s": 5}}
    eng = engine({**rule, "schedule": {"after": 1, "first": 1}}, clock=clock)
    assert eng.plan(call(0), None).empty
    plan = eng.plan(call(1), None)
    assert run(plan.before_upstream()) == Reset() and plan.cuts_streams() == {"server"}
    clock.t += 4
    # Another method (a listing the rule does not match) and another session: the server is gone for all.
    listing = ex(2, session="other", provider="mcp", operation="tools/list", host="tools.local", port=8000)
    assert run(eng.plan(listing, None).before_upstream()) == Reset()
    assert eng.plan(call(3, host="elsewhere.local"), None).empty  # another server is up
    clock.t += 1.5
    assert eng.plan(call(4), None).empty  # back after down_s: `first: 1` is spent


def test_without_down_s_it_stays_gone() -> None:
    clock = Clock()
    eng = engine(
        {"name": "crash", "match": {"provider": "mcp"}, "fault": {"type": "server_gone"}, "schedule": {"first": 1}},
        clock=clock,
    )
    run(eng.plan(call(0), None).before_upstream())
    clock.t += 3600
    assert run(eng.plan(call(1), None).before_upstream()) == Reset()


def test_takes_the_server_down(make_ctx) -> None:
    fault = ServerGoneFault(ServerGoneParams(type="server_gone"))
    assert fault.cuts_streams(make_ctx()) == "server" and run(fault.before_upstream(make_ctx())) == Reset()
