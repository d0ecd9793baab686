"""OTLP/HTTP exports as a wire format of their own: recognised, decoded, never a tool call, faulted only by name."""

from __future__ import annotations

import pytest

from brownout.core.exchange import Exchange
from brownout.core.wire import detect
from brownout.core.wire.base import RequestInfo
from brownout.core.wire.otlp import SPANS_NOTE
from brownout.faults.config import MatchConfig
from brownout.faults.match import CompiledMatch, Stage
from tests.agentspans.otlpdata import AgentTracer, json_bytes, proto_bytes

PROTOBUF = "application/x-protobuf"


def _spans_body(encoding: str) -> tuple[bytes, str]:
    agent = AgentTracer()
    with agent.span("chat gpt-4o", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o"}):
        pass
    spans = agent.finished()
    return (proto_bytes(spans), PROTOBUF) if encoding == "protobuf" else (json_bytes(spans), "application/json")


def _parsed(path: str, body: bytes, ctype: str, method: str = "POST") -> Exchange:
    headers = {"content-type": ctype}
    fmt, op = detect(RequestInfo(method=method, host="collector", path=path, query="", headers=headers, body=body))
    ex = Exchange(id="x", session="s", method=method, host="collector", path=path, request_headers=headers)
    ex.provider, ex.operation = fmt.provider, op
    fmt.parse_request(ex, body)
    return ex


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_a_trace_export_is_otlp_and_carries_its_spans(encoding: str) -> None:
    body, ctype = _spans_body(encoding)
    ex = _parsed("/v1/traces", body, ctype)
    assert (ex.provider, ex.operation, ex.gen_ai_provider) == ("otlp", "export_traces", None)
    assert not ex.tool_calls and ex.tool_name is None  # the generic format took a JSON one for a tool call
    assert [s.name for s in ex.notes[SPANS_NOTE]] == ["chat gpt-4o"]
    assert ex.parse_error is None


@pytest.mark.parametrize(
    ("path", "operation"),
    [("/v1/metrics", "export_metrics"), ("/v1/logs", "export_logs"), ("/otlp/v1/traces", "export_traces")],
)
def test_every_signal_and_a_prefixed_path(path: str, operation: str) -> None:
    ex = _parsed(path, b"{}", "application/json")
    assert (ex.provider, ex.operation) == ("otlp", operation)
    assert not ex.notes.get(SPANS_NOTE)  # an empty export: no spans


@pytest.mark.parametrize(
    ("method", "path", "ctype"),
    [("GET", "/v1/traces", PROTOBUF), ("POST", "/v1/tracesx", PROTOBUF), ("POST", "/v1/traces", "text/plain")],
)
def test_what_is_not_an_otlp_export(method: str, path: str, ctype: str) -> None:
    assert _parsed(path, b"{}", ctype, method).provider != "otlp"


def test_a_body_that_is_no_export_is_a_parse_error_not_a_failure() -> None:
    ex = _parsed("/v1/traces", b"\xff\xff\xff", PROTOBUF)
    assert (ex.provider, ex.parse_error_reason) == ("otlp", "invalid_protobuf")
    ex = _parsed("/v1/traces", b"{broken", "application/json")
    assert ex.parse_error_reason == "invalid_json"


def test_only_a_rule_that_names_otlp_matches_an_export() -> None:
    ex = _parsed("/v1/traces", *_spans_body("json"))
    assert CompiledMatch(MatchConfig()).request_stage(ex) is Stage.NO
    assert CompiledMatch(MatchConfig(host="collector")).request_stage(ex) is Stage.NO
    assert CompiledMatch(MatchConfig(provider="otlp")).request_stage(ex) is Stage.YES
    other = _parsed("/tools/weather", b"{}", "application/json")
    assert CompiledMatch(MatchConfig()).request_stage(other) is Stage.YES
