"""Compiled matching: every field, globs, and the request/response stages of `tool`."""

from __future__ import annotations

from typing import Any

import pytest

from brownout.core.exchange import Exchange, ToolCall
from brownout.faults.config import MatchConfig
from brownout.faults.match import CompiledMatch, Stage, compile_glob


def ex(**kw: Any) -> Exchange:
    base: dict[str, Any] = {
        "id": "e1",
        "session": "run-17",
        "method": "POST",
        "host": "api.openai.com",
        "path": "/v1/chat/completions?api-version=1",
        "provider": "openai",
        "operation": "chat",
        "model": "gpt-4o-mini",
        "stream": False,
        "request_headers": {"x-team": "blue-7", "user-agent": "OpenAI/Python 3.54"},
    }
    base.update(kw)
    return Exchange(**base)


def stage(match: dict[str, Any], **kw: Any) -> Stage:
    return CompiledMatch(MatchConfig.model_validate(match)).request_stage(ex(**kw))


def test_empty_match_matches_everything() -> None:
    assert stage({}) is Stage.YES


@pytest.mark.parametrize(
    ("match", "hit", "miss"),
    [
        ({"host": "*.openai.com"}, {}, {"host": "api.anthropic.com"}),
        ({"host": "API.OpenAI.com"}, {}, {"host": "api.openai.co"}),  # hosts are case-insensitive
        ({"path": "/v1/chat/*"}, {}, {"path": "/v1/embeddings"}),
        ({"path": "/v1/chat/completions"}, {}, {"path": "/v1/chat/completions/x"}),  # query ignored
        ({"method": "post"}, {}, {"method": "GET"}),
        ({"provider": "openai"}, {}, {"provider": "anthropic"}),
        ({"operation": "chat"}, {}, {"operation": "embeddings"}),
        ({"model": "gpt-4o*"}, {}, {"model": "o3"}),
        ({"model": "gpt-4o*"}, {}, {"model": None}),
        ({"stream": False}, {}, {"stream": True}),
        ({"stream": True}, {"stream": True}, {}),
        ({"header": {"X-Team": "blue-*"}}, {}, {"request_headers": {"x-team": "red-1"}}),
        ({"header": {"x-team": "*"}}, {}, {"request_headers": {}}),  # absent header never matches
        ({"session": "run-1?"}, {}, {"session": "run-170"}),
        ({"mcp_method": "tools/*"}, {"mcp_method": "tools/call"}, {"mcp_method": "resources/read"}),
        ({"mcp_method": "tools/*"}, {"mcp_method": "tools/list"}, {"mcp_method": None}),
    ],
)
def test_each_field(match: dict[str, Any], hit: dict[str, Any], miss: dict[str, Any]) -> None:
    assert stage(match, **hit) is Stage.YES
    assert stage(match, **miss) is Stage.NO


def test_all_fields_must_match() -> None:
    m = {"provider": "openai", "model": "gpt-4o*", "header": {"x-team": "blue-*"}}
    assert stage(m) is Stage.YES
    assert stage(m, model="gpt-3.5") is Stage.NO
    assert stage(m, request_headers={"x-team": "blue-1"}, provider="ollama") is Stage.NO


def test_tool_known_at_request_time_is_decided_at_request_time() -> None:
    m = {"tool": "search_*"}
    mcp = {"provider": "mcp", "operation": "tools/call", "mcp_method": "tools/call"}
    assert stage(m, tool_name="search_web", **mcp) is Stage.YES
    assert stage(m, tool_name="send_email", **mcp) is Stage.NO
    assert stage(m, provider="http", operation="execute_tool", tool_name="search_db") is Stage.YES


def test_tool_of_an_llm_response_defers_to_the_response_stage() -> None:
    compiled = CompiledMatch(MatchConfig(tool="send_*"))
    exchange = ex()
    assert compiled.request_stage(exchange) is Stage.DEFER
    assert compiled.response_match(exchange) is None
    exchange.tool_calls = [ToolCall(name="lookup"), ToolCall(name="send_email", index=1)]
    assert compiled.response_match(exchange) == "send_email"


def test_tool_never_matches_traffic_without_tools() -> None:
    # A plain HTTP call names no tool and parses no tool calls: no match rather than a deferral.
    assert stage({"tool": "*"}, provider="http", operation="http") is Stage.NO
    assert stage({"tool": "x", "provider": "anthropic"}) is Stage.NO  # other fields still decide first


def test_compile_glob() -> None:
    assert compile_glob("a*c")("abbbc") and not compile_glob("a*c")("abcd")
    assert compile_glob("gpt-4o")("gpt-4o") and not compile_glob("gpt-4o")("GPT-4O")
    assert compile_glob("gpt-4o", ignore_case=True)("GPT-4O")
    assert compile_glob("v[12]")("v2") and not compile_glob("v[12]")("v3")
