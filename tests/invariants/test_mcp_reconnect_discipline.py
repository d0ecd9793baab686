"""mcp_reconnect_discipline: how an MCP client comes back after its session fails."""

from __future__ import annotations

from itertools import count
from typing import Any

from brownout.core.exchange import Exchange, Timings
from tests.invariants.builders import T0, Harness

_n = count(1)


def mcp(
    operation: str, t: float, *, status: int | None = 200, session_id: str | None = "s-1", dur: float = 0.01, **kw: Any
) -> Exchange:
    """An MCP exchange over HTTP: `operation` is the JSON-RPC method, or server_stream / session_end."""
    n = next(_n)
    ex = Exchange(
        id=f"m-{n}",
        session="agent",
        method={"server_stream": "GET", "session_end": "DELETE"}.get(operation, "POST"),
        host="tools.local",
        port=8000,
        path="/mcp",
        provider="mcp",
        gen_ai_provider="mcp",
        operation=operation,
        mcp_method=None if operation in ("server_stream", "session_end") else operation,
        status=status,
        timings=Timings(start=T0 + t, end=T0 + t + dur),
    )
    if session_id is not None:
        ex.notes["mcp_session_id"] = session_id
    if status is None:
        ex.error_type = "connection"
    for key, value in kw.items():
        setattr(ex, key, value)
    return ex


def checks(found: list[Any]) -> list[str]:
    return [v.details["check"] for v in found]


def test_a_client_that_starts_a_new_session_after_an_expiry_is_fine() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline"}])
    assert h.run(mcp("tools/call", 0, status=404)) == []  # the session expired
    # At once, as the spec asks: a new initialize without the old id, then the new session's requests.
    fresh = [mcp("initialize", 0.02, session_id=None), mcp("server_stream", 0.05, session_id="s-2", dur=5)]
    assert h.run_all(mcp("tools/call", 0.04, session_id="s-2"), *fresh) == []
    assert h.close_all() == []


def test_using_the_expired_session_again_is_reported_once() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline"}])
    expired = mcp("tools/call", 0, status=404)
    h.run(expired)
    assert h.run(mcp("session_end", 0.02, status=404)) == []  # ending it is harmless
    (v,) = h.run(mcp("tools/list", 0.05, status=404))
    assert checks([v]) == ["expired_session"] and v.message.startswith("tools/list sent on an MCP session")
    assert h.run(mcp("server_stream", 1.05, status=404)) == []  # once per session
    # A request sent before the 404 arrived knew nothing of it.
    h2 = Harness([{"type": "mcp_reconnect_discipline"}])
    h2.run(mcp("tools/call", 0, status=404, dur=0.5))
    assert h2.run(mcp("tools/list", 0.1, status=404)) == []


def test_reconnecting_without_backoff_after_failed_reconnects_and_storms() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline", "max_per_minute": 4}])
    assert h.run(mcp("tools/call", 0, status=None)) == []  # the server went away
    found: list[Any] = []
    for i in range(6):  # a new initialize every 50 ms, each reset
        found += h.run(mcp("initialize", 0.05 * (i + 1), status=None, session_id=None))
    assert checks(found) == ["backoff", "storm"]
    backoff, storm = found
    assert "after a failed reconnect, without backing off (min 0.5 s)" in backoff.message
    assert storm.details == {"check": "storm", "reconnects": 5, "max_per_minute": 4}


def test_backing_off_passes_and_a_working_request_ends_the_chain() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline", "max_per_minute": 4}])
    h.run(mcp("tools/call", 0, status=503))
    found: list[Any] = []
    t = 0.0
    for wait in (0.0, 0.5, 1.0):  # the first at once, then exponential backoff
        t += wait + 0.01
        found += h.run(mcp("initialize", t, status=None, session_id=None))
    found += h.run(mcp("initialize", t + 2, session_id=None))  # back
    found += h.run(mcp("tools/call", t + 2.1, session_id="s-2"))  # working again: the chain is over
    found += h.run_all(*(mcp("initialize", t + 3 + i, session_id=None) for i in range(5)))  # no failure: no chain
    assert found == [] and h.close_all() == []


def test_stream_and_session_reconnects_are_judged_apart_and_checks_can_be_chosen() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline", "checks": ["backoff"]}])
    h.run(mcp("server_stream", 0, status=None, dur=2))  # the server's stream was cut
    # The SDK client re-opens its GET stream after 1 s, twice: fine; a session reconnect right after is another kind.
    assert h.run_all(mcp("server_stream", 3, status=None), mcp("server_stream", 4.02, status=None)) == []
    assert h.run(mcp("initialize", 4.04, status=None, session_id=None)) == []
    (v,) = h.run(mcp("initialize", 4.06, status=None, session_id=None))
    assert v.details["kind"] == "session"


def test_2026_listen_and_discover_are_reconnects_too() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline"}])
    h.run(mcp("subscriptions/listen", 0, status=None, session_id=None, dur=3))  # the listen stream was lost
    assert h.run(mcp("server/discover", 3.01, status=None, session_id=None)) == []
    (v,) = h.run(mcp("server/discover", 3.03, status=None, session_id=None))
    assert v.details["check"] == "backoff"


def test_other_providers_and_old_failures_change_nothing() -> None:
    h = Harness([{"type": "mcp_reconnect_discipline"}])
    h.run(mcp("tools/call", 0, status=None))
    assert h.run(mcp("initialize", 0.01, status=None, session_id=None)) == []
    assert h.run(mcp("initialize", 200, status=None, session_id=None)) == []  # past chain_reset_s: a new chain
    assert h.run(mcp("initialize", 200.02, status=None, session_id=None)) == []  # its first reconnect may come at once
