"""Decoding the agent's spans from OTLP: the SDK's own protobuf, and OTLP JSON."""

from __future__ import annotations

import json

import pytest

from brownout.core.agent_spans import STATUS_ERROR, STATUS_OK, STATUS_UNSET, decode_traces
from tests.agentspans.otlpdata import AgentTracer, json_bytes, otlp_json, proto_bytes


def _agent_run() -> AgentTracer:
    agent = AgentTracer()
    with agent.span("invoke_agent helper", {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "helper"}):
        with agent.span(
            "chat gpt-4o-mini",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.usage.output_tokens": 7,
            },
        ):
            with agent.span("POST", {"http.request.method": "POST"}):
                pass
        with agent.span(
            "execute_tool get_weather",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": '{"city": "Paris"}',
            },
            ok=False,
        ):
            pass
    return agent


@pytest.mark.parametrize("encoding", ["protobuf", "json"])
def test_the_sdks_export_decodes_to_the_agents_spans(encoding: str) -> None:
    finished = _agent_run().finished()
    body, ctype = (proto_bytes(finished), "application/x-protobuf")
    if encoding == "json":
        body, ctype = json_bytes(finished), "application/json"
    spans = decode_traces(body, ctype)
    assert spans is not None
    by_name = {s.name: s for s in spans}
    assert set(by_name) == {"invoke_agent helper", "chat gpt-4o-mini", "POST", "execute_tool get_weather"}
    chat, http, tool, run = (
        by_name["chat gpt-4o-mini"],
        by_name["POST"],
        by_name["execute_tool get_weather"],
        by_name["invoke_agent helper"],
    )
    assert chat.genai and chat.is_llm and chat.provider == "openai" and chat.request_model == "gpt-4o-mini"
    assert (chat.input_tokens, chat.output_tokens) == (12, 7)
    assert not http.genai and http.parent_span_id == chat.span_id  # only its place in the tree
    assert tool.is_tool and tool.tool_name == "get_weather" and tool.tool_call_id == "call_1"
    assert tool.tool_arguments == '{"city": "Paris"}' and tool.status == STATUS_ERROR and tool.failed
    assert run.operation == "invoke_agent" and run.agent_name == "helper" and run.status == STATUS_UNSET
    assert run.parent_span_id is None and chat.parent_span_id == run.span_id
    assert len({s.trace_id for s in spans}) == 1 and all(len(s.trace_id) == 32 for s in spans)
    assert all(s.service == "agent" for s in spans if s.genai)
    assert all(s.end_ns >= s.start_ns > 0 for s in spans)


def test_openinference_spans_read_as_genai_ones() -> None:
    agent = AgentTracer()
    with agent.span(
        "ChatCompletion",
        {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o",
            "llm.provider": "openai",
            "llm.token_count.prompt": 3,
            "llm.token_count.completion": 4,
        },
        ok=True,
    ):
        pass
    (span,) = decode_traces(proto_bytes(agent.finished()), "application/x-protobuf") or []
    assert (span.operation, span.request_model, span.provider) == ("chat", "gpt-4o", "openai")
    assert (span.input_tokens, span.output_tokens, span.status) == (3, 4, STATUS_OK)


def test_status_names_and_bad_ids_in_json() -> None:
    doc = otlp_json(_agent_run().finished())
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[0]["status"] = {"code": "STATUS_CODE_OK"}
    spans[1]["spanId"] = "not-hex-at-all!!"
    spans[2]["traceId"] = "00000000000000000000000000000000"
    decoded = decode_traces(json.dumps(doc).encode(), "application/json; charset=utf-8") or []
    assert len(decoded) == 2
    assert decoded[0].status == STATUS_OK


@pytest.mark.parametrize(
    ("body", "ctype"),
    [(b"\xff\xff\xff", "application/x-protobuf"), (b"{not json", "application/json"), (b"[1]", "application/json")],
)
def test_what_is_not_an_export_decodes_to_none(body: bytes, ctype: str) -> None:
    assert decode_traces(body, ctype) is None
