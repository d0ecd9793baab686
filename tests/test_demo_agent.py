"""The demo agent against the mock upstream directly (no proxy): happy path and survived faults."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from brownout.proxy.demo.agent import run_agent
from brownout.proxy.demo.agent_steps import AgentSummary
from brownout.proxy.demo.upstream import MockUpstream
from brownout.proxy.freeport import free_port


@pytest.fixture(scope="module")
def up() -> Iterator[MockUpstream]:
    with MockUpstream.run_in_thread() as upstream:
        yield upstream


def test_agent_happy_path(up: MockUpstream) -> None:
    before = len(up.requests_seen)
    s = run_agent(up.url)
    assert s.errors == 0 and s.calls_made == 7 and s.http_attempts == 7
    assert s.final_answer == "It is 18°C and cloudy in Paris."
    assert [st.api for st in s.steps] == ["openai.chat", "tool", "openai.chat"] * 2 + ["anthropic.messages"]
    assert [st.stream for st in s.steps] == [False, False, True, True, False, False, True]
    assert all(st.ttfc_ms is not None for st in s.steps if st.stream)
    paths = [r.path.split("?")[0] for r in up.requests_seen[before:]]
    assert paths.count("/v1/chat/completions") == 4 and paths.count("/tools/weather") == 2
    assert paths[-1] == "/v1/messages"
    # The tool result went back to the model.
    tool_msgs = [
        json.loads(r.body)["messages"][-1]
        for r in up.requests_seen[before:]
        if r.path == "/v1/chat/completions" and b'"tool"' in r.body
    ]
    assert tool_msgs and all(json.loads(m["content"])["temp_c"] == 18 for m in tool_msgs)


def test_agent_records_llm_errors_and_keeps_going(up: MockUpstream) -> None:
    s = run_agent(up.url, max_retries=0, llm_headers={"x-mock-status": "400"})
    # Each turn stops at its failed first call; the anthropic step still runs and fails.
    assert [st.ok for st in s.steps] == [False, False, False]
    assert s.steps[0].error_type == "openai.BadRequestError" and s.steps[0].status == 400
    assert s.steps[2].error_type == "anthropic.BadRequestError"
    assert s.final_answer is None and s.errors == 3


def test_agent_retries_are_counted(up: MockUpstream) -> None:
    s = run_agent(up.url, max_retries=1, llm_headers={"x-mock-status": "503"}, timeout_s=5)
    assert all(st.attempts == 2 and not st.ok for st in s.steps)
    assert s.steps[0].error_type == "openai.InternalServerError"


def test_agent_survives_a_dead_tool_api(up: MockUpstream) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there, below the ephemeral range
    s = run_agent(up.url, tools_url=dead)
    tools = [st for st in s.steps if st.api == "tool"]
    assert len(tools) == 2 and not any(t.ok for t in tools)
    assert tools[0].error_type == "httpx.ConnectError"
    # The agent reported the failure to the model and still got an answer.
    assert s.final_answer is not None and s.final_answer.startswith("The tool returned:")
    assert s.errors == 2 and s.calls_made == 7


def test_agent_cli_json(up: MockUpstream) -> None:
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    out = subprocess.run(
        [sys.executable, "-m", "brownout.proxy.demo.agent", "--upstream", up.url, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=True,
    )
    summary = AgentSummary.from_dict(json.loads(out.stdout))
    assert summary.errors == 0 and summary.final_answer == "It is 18°C and cloudy in Paris."


def test_run_demo_through_embedded_brownout(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from io import StringIO

    from rich.console import Console

    from brownout.proxy.demo.run import run_demo

    monkeypatch.setenv("BROWNOUT_CONFDIR", str(tmp_path))  # a throwaway CA, not ~/.brownout
    out = StringIO()
    assert run_demo(Console(file=out, width=160)) == 0
    text = out.getvalue()
    assert "Exchanges seen by brownout" in text and "anthropic" in text and "execute_tool" in text
    assert "It is 18°C and cloudy in Paris." in text
