"""`brownout cassette ls|show|redact|har` on a written cassette."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.record.cassette import Event, Recorded, read_dir
from brownout.proxy.record.writer import CassetteWriter

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"
CHAT_ANSWER = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o",
    "choices": [
        {
            "index": 0,
            "message": {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
                ],
            },
            "finish_reason": "tool_calls",
        }
    ],
}


def _chat(session: str) -> Recorded:
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": f"mail bob@example.com, key {KEY}"}]}
    return Recorded(
        session=session,
        seq=0,
        method="POST",
        url="https://api.openai.com/v1/chat/completions?tenant=acme",
        request_headers=[("content-type", "application/json"), ("x-internal", "secret-host")],
        request_body=json.dumps(body).encode(),
        status=200,
        reason="OK",
        response_headers=[("content-type", "application/json")],
        body=json.dumps(CHAT_ANSWER).encode(),
        end_s=0.4,
    )


def _mcp(session: str) -> Recorded:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get_weather", "arguments": {}}}
    return Recorded(
        session=session,
        seq=0,
        method="POST",
        url="http://127.0.0.1:3000/mcp",
        request_headers=[("content-type", "application/json")],
        request_body=json.dumps(call).encode(),
        status=200,
        response_headers=[("content-type", "text/event-stream")],
        events=[Event(0.1, b'data: {"jsonrpc":"2.0","id":1,"result":{"content":[]}}\n\n')],
    )


@pytest.fixture
def cassettes(tmp_path: Path) -> Path:
    writer = CassetteWriter(tmp_path / "tape")
    for rec in (_chat("agent-1"), _mcp("agent-1"), _chat("agent-2")):
        writer.put(rec)
    writer.close()
    return tmp_path / "tape"


def invoke(*args: str) -> str:
    result = CliRunner().invoke(main, ["cassette", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_ls_counts_sessions_and_exchanges_per_provider_model_and_tool(cassettes: Path) -> None:
    listing = json.loads(invoke("ls", str(cassettes), "--json"))
    assert [(s["session"], s["exchanges"]) for s in listing["sessions"]] == [("agent-1", 2), ("agent-2", 1)]
    totals = {(t["provider"], t["model"], t["tool"]): t["exchanges"] for t in listing["totals"]}
    assert totals == {("openai", "gpt-4o", "get_weather"): 2, ("mcp", "", "get_weather"): 1}
    assert "agent-1" in invoke("ls", str(cassettes))


def test_show_lists_one_sessions_exchanges(cassettes: Path) -> None:
    lines = [json.loads(line) for line in invoke("show", str(cassettes), "agent-1", "--json").splitlines()]
    assert [(v["provider"], v["operation"], v["events"]) for v in lines] == [
        ("openai", "chat", None),
        ("mcp", "tools/call", 1),
    ]
    assert lines[0]["tool_calls"] == ["get_weather"] and lines[1]["tool"] == "get_weather"
    assert CliRunner().invoke(main, ["cassette", "show", str(cassettes), "nobody"]).exit_code == 2


def test_redact_removes_keys_in_bodies_and_what_it_is_told(cassettes: Path) -> None:
    out = invoke("redact", str(cassettes), "--header", "x-internal", "--param", "tenant", "--pii")
    assert "value(s) redacted" in out
    text = "".join(p.read_text() for p in cassettes.iterdir())
    for gone in (KEY, "bob@example.com", "secret-host", "tenant=acme"):
        assert gone not in text
    assert "tenant=REDACTED" in text
    assert len([r for c in read_dir(cassettes) for r in c.exchanges]) == 3  # still a valid cassette


def test_har_export_has_every_exchange(cassettes: Path, tmp_path: Path) -> None:
    invoke("har", str(cassettes), "-o", str(tmp_path / "out.har"))
    har = json.loads((tmp_path / "out.har").read_text())
    entries = har["log"]["entries"]
    assert len(entries) == 3 and entries[0]["request"]["url"].startswith("https://api.openai.com/v1/chat/completions")
    assert entries[1]["response"]["content"]["text"].startswith("data: ")
