"""Discovery from traces the agent already exported: OTLP JSON lines (the collector's file exporter), a
Tempo export and a Jaeger export of the same spans give the same inventory, and an experiment that validates."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from opentelemetry.sdk.trace import ReadableSpan

from brownout.proxy.cli import main
from tests.agentspans.otlpdata import AgentTracer, otlp_json

MODEL = "gpt-4o-mini"
OPENAI = {
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": MODEL,
    "server.address": "api.openai.com",
    "server.port": 443,
}


def _run() -> tuple[ReadableSpan, ...]:
    """Two agent runs: OpenAI with a tool and a rate limit, spanned by a framework and by the client library;
    Anthropic with an MCP tool."""
    agent = AgentTracer()
    with agent.span("invoke_agent weather", {"gen_ai.operation.name": "invoke_agent"}):
        with agent.span("response", {"gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL}):
            usage = {"gen_ai.usage.input_tokens": 50, "gen_ai.usage.output_tokens": 12}
            with agent.span(f"chat {MODEL}", {"gen_ai.operation.name": "chat", **OPENAI, **usage}):
                pass
        tool = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.call.arguments": '{"city": "Paris", "days": 2}',
        }
        with agent.span("execute_tool get_weather", tool):
            pass
        limited = {"gen_ai.operation.name": "chat", **OPENAI, "error.type": "429", "http.response.status_code": 429}
        with agent.span(f"chat {MODEL}", limited, ok=False):
            pass
        with agent.span(f"chat {MODEL}", {"gen_ai.operation.name": "chat", **OPENAI, "gen_ai.request.stream": True}):
            pass
    with agent.span("invoke_agent notes", {"gen_ai.operation.name": "invoke_agent"}):
        claude = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4",
        }
        with agent.span("chat claude-sonnet-4", {**claude, "server.address": "api.anthropic.com"}):
            pass
        mcp = {"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        with agent.span("tools/call search", {**mcp, "server.address": "127.0.0.1", "server.port": 8931}):
            pass
    return agent.finished()


def _otlp_lines(spans: tuple[ReadableSpan, ...], path: Path) -> Path:
    half = len(spans) // 2  # a collector writes a line per export batch: a trace may straddle two
    path.write_text("\n".join(json.dumps(otlp_json(part)) for part in (spans[:half], spans[half:])) + "\n")
    return path


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def _tempo(spans: tuple[ReadableSpan, ...], path: Path) -> Path:
    doc = otlp_json(spans)
    for span in doc["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        for key in ("traceId", "spanId", "parentSpanId"):
            if key in span:
                span[key] = _b64(span[key])
    path.write_text(json.dumps({"batches": doc["resourceSpans"]}, indent=2))
    return path


def _jaeger(spans: tuple[ReadableSpan, ...], path: Path) -> Path:
    def tag(key: str, value: Any) -> dict[str, Any]:
        kind = "bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "string"
        return {"key": key, "type": kind, "value": value}

    out = []
    for span in spans:
        ctx = span.get_span_context()
        tags = [tag(k, v) for k, v in (span.attributes or {}).items()]
        if span.status.status_code.name != "UNSET":
            tags.append(tag("otel.status_code", span.status.status_code.name))
        refs = (
            []
            if span.parent is None
            else [{"refType": "CHILD_OF", "traceID": f"{ctx.trace_id:032x}", "spanID": f"{span.parent.span_id:016x}"}]
        )
        out.append(
            {
                "traceID": f"{ctx.trace_id:032x}",
                "spanID": f"{ctx.span_id:016x}",
                "operationName": span.name,
                "references": refs,
                "startTime": span.start_time // 1000,
                "duration": (span.end_time - span.start_time) // 1000,
                "tags": tags,
                "processID": "p1",
            }
        )
    traces: dict[str, list[Any]] = {}
    for item in out:
        traces.setdefault(item["traceID"], []).append(item)
    doc = {
        "data": [{"traceID": t, "spans": s, "processes": {"p1": {"serviceName": "agent"}}} for t, s in traces.items()]
    }
    path.write_text(json.dumps(doc, indent=2))
    return path


def _discover(*args: str) -> Any:
    result = CliRunner().invoke(main, ["discover", *args])
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    spans, root = _run(), tmp_path_factory.mktemp("traces")
    return {
        "OTLP JSON": _otlp_lines(spans, root / "otel.jsonl"),
        "Tempo JSON": _tempo(spans, root / "tempo.json"),
        "Jaeger JSON": _jaeger(spans, root / "jaeger.json"),
    }


def test_every_format_gives_the_same_inventory(files: dict[str, Path]) -> None:
    inventories = {}
    for kind, path in files.items():
        data = json.loads(_discover(str(path), "--json").output)
        assert data.pop("source")["kind"] == kind
        inventories[kind] = data
    otlp = inventories["OTLP JSON"]
    assert inventories["Tempo JSON"] == otlp
    jaeger = inventories["Jaeger JSON"]
    for data in (otlp, jaeger):  # Jaeger keeps microseconds only: the sessions' durations aside, the same
        assert data["providers"] == otlp["providers"] and data["llm_tools"] == otlp["llm_tools"]
        assert data["errors"] == otlp["errors"] and data["mcp_servers"] == otlp["mcp_servers"]


def test_what_the_inventory_says(files: dict[str, Path]) -> None:
    data = json.loads(_discover(str(files["OTLP JSON"]), "--json").output)
    openai = data["providers"]["openai"]
    assert openai["hosts"] == ["api.openai.com:443"] and openai["operations"] == {"chat": 3}
    model = openai["models"][MODEL]
    assert (model["calls"], model["streamed"], model["input_tokens"]) == (3, 1, 50)  # spanned twice, counted once
    assert model["tool_calls"] == {"get_weather": 1}
    assert data["llm_tools"]["get_weather"]["shapes"] == [{"shape": {"city": "string", "days": "integer"}, "calls": 1}]
    assert data["providers"]["anthropic"]["models"]["claude-sonnet-4"]["calls"] == 1
    assert data["errors"] == [{"target": f"openai {MODEL}", "status": "429", "error_type": "429", "count": 1}]
    (server,) = data["mcp_servers"].values()
    assert server["methods"] == {"tools/call": 1} and list(server["tools"]) == ["search"]
    assert len(data["sessions"]) == 2  # a trace is a session
    text = _discover(str(files["OTLP JSON"])).output
    assert "OTLP JSON" in text and MODEL in text


def test_an_experiment_from_traces_validates(files: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "exp.yaml"
    _discover(str(files["Jaeger JSON"]), "--out", str(out), "--agent", "python agent.py")
    text = out.read_text()
    assert "source: Jaeger JSON" in text and "provider: openai" in text and "provider: anthropic" in text
    check = CliRunner().invoke(main, ["validate", str(out)])
    assert check.exit_code == 0, check.output


def test_a_broken_trace_file_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "otel.jsonl"
    path.write_text('{"resourceSpans": []}\n{"resourceSpans": [\n')
    result = CliRunner().invoke(main, ["discover", str(path)])
    assert result.exit_code != 0 and f"{path}:2: not an OTLP JSON line" in result.output
