"""The inventory counts what the exchange records say: providers, models, tools, MCP, tool APIs, errors, sessions."""

from __future__ import annotations

import json

from brownout.proxy.discover.inventory import Inventory
from tests.discover.traffic import SECRET_CITY, records


def test_exchange_log_records_carry_shapes_not_values() -> None:
    lines = records()
    assert lines[0]["tool_calls"] == ["get_weather"]
    assert lines[0]["tool_call_shapes"] == [{"city": "string", "days": "integer"}]
    assert lines[0]["tools_declared"] == ["get_weather", "send_email"]
    assert lines[5]["mcp_method"] == "tools/call"
    # The path keeps its query string as the log always has; every other field is free of the value.
    assert SECRET_CITY not in json.dumps([{k: v for k, v in r.items() if k != "path"} for r in lines])


def test_providers_models_and_streaming() -> None:
    inv = Inventory.of(records()).to_dict()
    assert set(inv["providers"]) == {"openai", "anthropic"}
    openai = inv["providers"]["openai"]
    assert (
        openai["exchanges"] == 4 and openai["hosts"] == ["api.openai.com:443"] and openai["operations"] == {"chat": 4}
    )
    gpt = openai["models"]["gpt-4o"]
    assert (gpt["calls"], gpt["streamed"], gpt["incomplete_streams"]) == (3, 1, 0)
    assert (gpt["input_tokens"], gpt["output_tokens"], gpt["cost_usd"]) == (20, 10, 0.004)
    cut = openai["models"]["ft:gpt-4o[eu]*"]
    assert (cut["streamed"], cut["incomplete_streams"], cut["cost_usd"]) == (1, 1, None)
    assert inv["providers"]["anthropic"]["models"]["claude-3-5-haiku"]["tool_calls"] == {"lookup": 1}
    assert inv["retries"] == 1


def test_llm_tools_mcp_servers_and_tool_apis() -> None:
    inv = Inventory.of(records()).to_dict()
    assert inv["llm_tools"]["get_weather"] == {
        "calls": 1,
        "declared": True,
        "shapes": [{"shape": {"city": "string", "days": "integer"}, "calls": 1}],
        "via": ["openai"],
    }
    assert inv["llm_tools"]["send_email"]["calls"] == 0 and inv["llm_tools"]["send_email"]["declared"]
    assert inv["llm_tools"]["lookup"]["declared"] is False
    (server,) = inv["mcp_servers"].values()
    assert server["methods"] == {"tools/call": 2, "tools/list": 1}
    weather = server["tools"]["get_weather"]
    assert weather["calls"] == 2 and weather["declared"]
    # Most calls first, then by canonical text: a shape sorts the same wherever it came from.
    assert [s["shape"] for s in weather["shapes"]] == [{"city": "string", "units": "string"}, {"city": "string"}]
    assert server["tools"]["noop"] == {"calls": 0, "declared": True, "shapes": []}
    apis = {a["path"]: a for a in inv["tool_apis"]}
    assert set(apis) == {"/v1/search", "/v1/notes"}
    assert apis["/v1/search"]["shapes"] == [
        {"shape": {"limit": "string", "q": "string"}, "calls": 1},
        {"shape": {"q": "string"}, "calls": 1},
    ]
    assert apis["/v1/search"]["statuses"] == {"200": 1, "no response": 1}
    assert apis["/v1/notes"]["shapes"][0]["shape"] == {"tags": ["string"], "title": "string"}
    assert inv["other_http"] == {"tools.example.com": 1}


def test_errors_faults_and_sessions() -> None:
    inv = Inventory.of(records()).to_dict()
    assert inv["errors"] == [
        {"target": "openai gpt-4o", "status": "429", "error_type": "-", "count": 1},
        {"target": "tools.example.com/v1/search", "status": "no response", "error_type": "connection", "count": 1},
    ]
    assert inv["faults"] == [{"rule": "rate-limited", "fault": "http_error", "count": 1}]
    s1, s2 = inv["sessions"]["s1"], inv["sessions"]["s2"]
    assert (s1["exchanges"], s1["llm_calls"], s1["tool_calls"], s1["errors"]) == (9, 5, 3, 2)
    assert (s2["exchanges"], s2["llm_calls"], s2["tool_calls"]) == (3, 0, 2)
    assert s1["input_tokens"] == 10 + 10 + 100 + 40 and s1["cost_usd"] == 0.004 and s2["cost_usd"] is None


def test_nothing_of_the_arguments_reaches_the_inventory() -> None:
    assert SECRET_CITY not in json.dumps(Inventory.of(records()).to_dict())


def test_logs_without_shapes_still_count_calls() -> None:
    old = [
        {k: v for k, v in r.items() if k not in ("tool_call_shapes", "tools_declared", "mcp_method")} for r in records()
    ]
    inv = Inventory.of(old).to_dict()
    assert inv["llm_tools"]["get_weather"]["calls"] == 1 and inv["llm_tools"]["get_weather"]["shapes"] == []
