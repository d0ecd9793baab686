"""MCP's two eras on the wire: which one each request speaks, its version, and 2026-07-28 header routing."""

from __future__ import annotations

import json
from typing import Any

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire import RequestInfo, detect
from brownout.core.wire.mcp_eras import era_of

META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def parsed(body: Any, headers: dict[str, str] | None = None, method: str = "POST") -> Exchange:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = headers or {}
    fmt, op = detect(RequestInfo(method=method, host="tools.local", path="/mcp", query="", headers=headers, body=raw))
    ex = Exchange(id="x", session="s", method=method, host="tools.local", path="/mcp")
    ex.request_headers = dict(headers)
    ex.provider, ex.operation = fmt.provider, op
    fmt.parse_request(ex, raw)
    return ex


def modern(method: str, params: dict[str, Any] | None = None, **headers: str) -> Exchange:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**(params or {}), "_meta": META}}
    return parsed(body, {"mcp-protocol-version": "2026-07-28", "mcp-method": method, **headers})


def test_a_2026_request_is_modern_by_its_envelope() -> None:
    ex = modern("tools/call", {"name": "get_weather", "arguments": {"city": "Oslo"}}, **{"mcp-name": "get_weather"})
    assert (ex.provider, ex.operation, ex.mcp_era, ex.tool_name) == ("mcp", "tools/call", "modern", "get_weather")
    assert ex.notes["mcp_protocol_version"] == "2026-07-28"
    # Without headers (stdio), the envelope alone says it.
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    assert parsed(body).mcp_era == "modern"


def test_handshake_requests_by_method_header_or_session() -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25"}}
    assert parsed(init).mcp_era == "handshake"
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    assert parsed(listing, {"mcp-protocol-version": "2025-06-18"}).mcp_era == "handshake"
    old = parsed(listing, {"mcp-session-id": "abc"})  # 2025-03-26 clients send no version header
    assert (old.mcp_era, old.notes.get("mcp_protocol_version")) == ("handshake", None)
    assert parsed(b"", {"mcp-session-id": "abc"}, method="DELETE").mcp_era == "handshake"
    assert parsed(listing).mcp_era is None  # nothing in it tells


@pytest.mark.parametrize(
    ("version", "method", "expected"),
    [
        ("2026-07-28", "initialize", "handshake"),  # a method only one era has decides
        ("2025-11-25", "server/discover", "modern"),
        ("2099-01-01", "tools/list", None),  # an unknown version says nothing by itself
        (None, "subscriptions/listen", "modern"),
    ],
)
def test_era_of(version: str | None, method: str, expected: str | None) -> None:
    assert era_of(version, method) == expected


def test_headers_route_a_body_too_large_to_read() -> None:
    # The proxy passes an uninspected body on as b"": Mcp-Method and Mcp-Name still name method and tool.
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "=?base64?w6l0w6k=?="}
    ex = parsed(b"", headers)
    assert (ex.provider, ex.operation, ex.mcp_method, ex.tool_name, ex.mcp_era) == (
        "mcp",
        "tools/call",
        "tools/call",
        "été",
        "modern",
    )
    prompt = parsed(b"", {**headers, "mcp-method": "prompts/get", "mcp-name": "review"})
    assert (prompt.operation, prompt.tool_name, prompt.notes["mcp_prompt_name"]) == ("prompts/get", None, "review")


def test_discover_listen_and_ttl() -> None:
    listen = modern("subscriptions/listen", {"notifications": {"toolsListChanged": True, "promptsListChanged": False}})
    assert (listen.operation, listen.notes["mcp_listen"]) == ("subscriptions/listen", ["tools"])
    listing = modern("tools/list")
    reply = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "ttlMs": 1500, "resultType": "complete"}}
    detect_fmt = detect(RequestInfo("POST", "h", "/mcp", "", {"mcp-method": "tools/list"}, b""))[0]
    detect_fmt.parse_response(listing, json.dumps(reply).encode())
    assert listing.notes["mcp_ttl_ms"] == 1500
    assert modern("server/discover").operation == "server/discover"


def test_2026_errors_carry_the_revision_status_and_shape() -> None:
    ex = modern("tools/call", {"name": "get_weather"})
    fmt = detect(RequestInfo("POST", "h", "/mcp", "", {"mcp-method": "tools/call"}, b""))[0]
    status, _, body = fmt.error_response(400, "invalid_params", "bad city", exchange=ex)
    assert (status, json.loads(body)["error"]["code"]) == (400, -32602)
    status, _, body = fmt.error_response(500, "tool_error", "down", exchange=ex)
    assert status == 200 and json.loads(body)["result"]["resultType"] == "complete"
    status, _, _ = fmt.error_response(500, "internal_error", exchange=ex)
    assert status == 200  # the revision gives -32603 no status of its own
    handshake = parsed({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}, {"mcp-protocol-version": "2025-11-25"})
    assert fmt.error_response(400, "invalid_params", exchange=handshake)[0] == 200


@pytest.mark.parametrize(
    ("method", "result"),
    [
        ("tools/list", {"tools": [], "cacheScope": "private", "ttlMs": 0, "resultType": "complete"}),
        ("tools/call", {"content": [], "isError": False, "resultType": "complete"}),
        (
            "server/discover",
            {
                "capabilities": {},
                "supportedVersions": ["2026-07-28"],
                "ttlMs": 0,
                "cacheScope": "private",
                "resultType": "complete",
            },
        ),
        (
            "subscriptions/listen",
            {"_meta": {"io.modelcontextprotocol/subscriptionId": 1}, "resultType": "complete"},
        ),
    ],
)
def test_empty_2026_results_are_valid_for_the_revision(method: str, result: dict[str, Any]) -> None:
    from mcp_types.methods import validate_server_result

    ex = modern(method)
    fmt = detect(RequestInfo("POST", "h", "/mcp", "", {"mcp-method": method}, b""))[0]
    _, body = fmt.empty_response(ex)
    got = json.loads(body)["result"]
    assert got == result
    validate_server_result(method, "2026-07-28", got)  # what the SDK's 2026-07-28 schema accepts
