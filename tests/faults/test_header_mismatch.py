"""header_mismatch: the 2026-07-28 HEADER_MISMATCH answer, in the SDK servers' exact shape."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from brownout.core.exchange import Exchange
from brownout.core.wire import by_provider
from brownout.faults.base import NotApplicable, Respond
from brownout.faults.config import RuleConfig
from brownout.faults.header_mismatch import HeaderMismatchFault, HeaderMismatchParams
from tests.faults.engine_support import run

MCP = by_provider("mcp")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def request(method: str, params: dict[str, object], *, envelope: bool = True, transport: str = "http") -> Exchange:
    ex = Exchange(id="x", session="s", provider="mcp", operation=method, transport=transport)
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, **({"_meta": META} if envelope else {})}}
    MCP.parse_request(ex, json.dumps(body).encode())
    return ex


def answer(make_ctx, ex: Exchange, header: str = "mcp-method") -> Respond:
    fault = HeaderMismatchFault(HeaderMismatchParams(type="header_mismatch", header=header))  # type: ignore[arg-type]
    ctx = make_ctx()
    ctx.exchange = ex
    result = run(fault.before_upstream(ctx))
    assert isinstance(result, Respond)
    return result


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("mcp-method", "mcp-method header does not match the request body's method"),
        ("mcp-name", "mcp-name header does not match the request body's 'name' parameter"),
        ("mcp-protocol-version", "mcp-protocol-version header does not match the request envelope's protocol version"),
    ],
)
def test_the_sdk_servers_answer(make_ctx, header: str, message: str) -> None:
    got = answer(make_ctx, request("tools/call", {"name": "get_weather"}), header)
    assert (got.status, got.headers["content-type"]) == (400, "application/json")
    assert json.loads(got.body) == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32020, "message": message}}


def test_where_it_cannot_apply(make_ctx) -> None:
    uri = answer(make_ctx, request("resources/read", {"uri": "file:///a"}), "mcp-name")
    assert "'uri' parameter" in json.loads(uri.body)["error"]["message"]
    with pytest.raises(NotApplicable, match="names nothing in Mcp-Name"):
        answer(make_ctx, request("tools/list", {}), "mcp-name")
    with pytest.raises(NotApplicable, match="only a 2026-07-28 MCP request"):
        answer(make_ctx, request("tools/list", {}, envelope=False))
    with pytest.raises(NotApplicable, match="stdio carries no headers"):
        answer(make_ctx, request("tools/list", {}, transport="stdio"))


def test_refused_for_the_handshake_era_at_load() -> None:
    with pytest.raises(ValidationError, match="header_mismatch cannot act on handshake-era MCP requests"):
        RuleConfig.model_validate(
            {"name": "x", "match": {"mcp_method": "initialize"}, "fault": {"type": "header_mismatch"}}
        )
    with pytest.raises(ValidationError):
        HeaderMismatchParams.model_validate({"type": "header_mismatch", "header": "accept"})
