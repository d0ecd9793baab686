"""session_expired: the 404 MCP servers send for a session they forgot, and the session staying expired."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from brownout.core.wire import by_provider
from brownout.faults.base import Respond
from brownout.faults.config import RuleConfig
from tests.faults.engine_support import Clock, engine, ex, run

MCP = by_provider("mcp")


def mcp(i: int, method: str = "tools/call", session: str | None = "abc", *, client: str = "agent", **kw: object):
    headers = {"mcp-protocol-version": "2025-11-25"}
    if session is not None:
        headers["mcp-session-id"] = session
    exchange = ex(i, session=client, provider="mcp", operation=method, path="/mcp", model=None, **kw)
    exchange.request_headers = headers
    body = {"jsonrpc": "2.0", "id": i, "method": method, "params": {"name": "get_weather"}}
    MCP.parse_request(exchange, json.dumps(body).encode())
    return exchange


def test_the_session_expires_and_stays_expired_whatever_the_schedule() -> None:
    eng = engine(
        {
            "name": "expire",
            "match": {"tool": "get_weather"},
            "fault": {"type": "session_expired"},
            "schedule": {"after": 1, "first": 1},
        }
    )
    assert eng.plan(mcp(0), MCP).empty  # the first call goes through
    plan = eng.plan(mcp(1), MCP)
    answer = run(plan.before_upstream())
    assert isinstance(answer, Respond) and answer.status == 404
    assert json.loads(answer.body) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32001, "message": "Session not found"},
    }
    # Every later request of that session: a listing the rule does not match, the DELETE, past `first`.
    for i, method in enumerate(["tools/list", "tools/call"], start=2):
        again = eng.plan(mcp(i, method), MCP)
        assert isinstance(run(again.before_upstream()), Respond)
    delete = mcp(9, "session_end")
    assert isinstance(run(eng.plan(delete, MCP).before_upstream()), Respond)
    assert "expired earlier" in next(d for d in eng.decisions.recent() if d.exchange_id == delete.id).reason
    # A new session (after a fresh initialize) is served.
    assert eng.plan(mcp(10, "initialize", session=None), MCP).empty
    assert eng.plan(mcp(11, session="new"), MCP).empty


def test_python_sdk_servers_code_and_requests_without_a_session() -> None:
    eng = engine({"name": "expire", "match": {"provider": "mcp"}, "fault": {"type": "session_expired", "code": -32600}})
    answer = run(eng.plan(mcp(0), MCP).before_upstream())
    assert isinstance(answer, Respond) and json.loads(answer.body)["error"]["code"] == -32600
    init = mcp(1, "initialize", session=None)
    assert run(eng.plan(init, MCP).before_upstream()) is None
    assert init.faults == [] and "no Mcp-Session-Id" in init.faults_skipped[0].params["skipped"]
    piped = mcp(2, session=None, transport="stdio")
    run(eng.plan(piped, MCP).before_upstream())
    assert "stdio server has no session" in piped.faults_skipped[0].params["skipped"]


def test_refused_for_the_2026_revision_at_load() -> None:
    rule = {"name": "x", "fault": {"type": "session_expired"}}
    with pytest.raises(
        ValidationError,
        match=r"session_expired cannot act on modern-era MCP requests: the 2026-07-28 revision has no sessions",
    ):
        RuleConfig.model_validate({**rule, "match": {"mcp_era": "modern"}})
    with pytest.raises(ValidationError, match="cannot act on modern-era"):
        RuleConfig.model_validate({**rule, "match": {"mcp_method": "server/discover"}})
    with pytest.raises(ValidationError, match=r"initialize is a handshake-era method, so match\.mcp_era modern never"):
        RuleConfig.model_validate(
            {
                **rule,
                "fault": {"type": "latency", "delay_ms": 1},
                "match": {"mcp_method": "initialize", "mcp_era": "modern"},
            }
        )
    RuleConfig.model_validate({**rule, "match": {"mcp_era": "handshake"}})


def test_paused_engine_lets_an_expired_session_through() -> None:
    clock = Clock()
    eng = engine({"name": "expire", "match": {"provider": "mcp"}, "fault": {"type": "session_expired"}}, clock=clock)
    run(eng.plan(mcp(0), MCP).before_upstream())
    eng.pause()
    assert eng.plan(mcp(1), MCP).empty
