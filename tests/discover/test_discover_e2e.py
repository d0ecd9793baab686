"""From traffic to experiment, end to end: the demo agent through the real proxy, discovered from each source.

The demo agent (official openai and anthropic SDKs, a JSON tool API) runs once through brownout with
an exchanges log and `--record`. `brownout discover` reads the log, the cassettes and the running
proxy's control API; each inventory must agree with the agent's own account of its steps, two runs
must print the same bytes, and the generated experiment must pass `brownout validate`. Running a
generated experiment against the demo upstream is docs/discovery.md's walkthrough, tested as written.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from brownout.proxy.certs import ensure_ca
from brownout.proxy.cli import main
from brownout.proxy.demo.agent_steps import AgentSummary
from brownout.proxy.embed import running_proxy

pytestmark = pytest.mark.timeout(600)

TOKEN = "discover-e2e-token"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "NO_PROXY")
BROWNOUT = shutil.which("brownout", path=str(Path(sys.executable).parent))


@dataclass
class Observed:
    """One recorded agent run and what discover printed from the live proxy."""

    root: Path
    upstream: str
    log: Path
    cassettes: Path
    agent: AgentSummary
    api_text: list[str]
    api_json: dict[str, Any]


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS and not k.startswith("BROWNOUT_")}
    return {**env, **extra}


def _discover(*args: str) -> str:
    result = CliRunner().invoke(main, ["discover", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def upstream_url() -> Iterator[str]:
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread(record=False) as up:
        yield up.url


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory, upstream_url: str) -> Observed:
    root = tmp_path_factory.mktemp("discover")
    log, cassettes = root / "exchanges.jsonl", root / "cassettes"
    config = root / "observe.yaml"
    config.write_text(
        f"version: 1\ncontrol: {{token: {TOKEN}}}\nexporters: {{jsonl: {{exchanges_path: {log}}}}}\n", encoding="utf-8"
    )
    options = {
        "brownout_record": str(cassettes),
        "brownout_metrics_listen": "127.0.0.1:0",
        "brownout_control_listen": "127.0.0.1:0",
    }
    confdir = ensure_ca(root / "conf").confdir
    with running_proxy(config, confdir=confdir, extra_options=options) as proxy:
        run = subprocess.run(
            [sys.executable, "-m", "brownout.proxy.demo.agent", "--upstream", upstream_url, "--json"],
            env=_clean_env(**proxy.env),
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert run.returncode == 0, run.stderr
        agent = AgentSummary.from_dict(json.loads(run.stdout.strip().splitlines()[-1]))
        deadline = time.monotonic() + 10  # each exchange is summarised just after its answer went out
        while len(proxy.addon.pipeline.exporters.recent_exchanges()) < agent.http_attempts:
            assert time.monotonic() < deadline, "the proxy did not summarise every exchange"
            time.sleep(0.02)
        url = proxy.addon.control.url
        api_text = [_discover(url, "--token", TOKEN) for _ in range(2)]
        api_json = json.loads(_discover(url, "--token", TOKEN, "--json"))
        contained = proxy.addon.guard.snapshot()
    assert not contained, f"the proxy contained failures: {contained}"
    return Observed(root, upstream_url, log, cassettes, agent, api_text, api_json)


def _inventories(observed: Observed) -> dict[str, dict[str, Any]]:
    return {
        "exchanges log": json.loads(_discover(str(observed.log), "--json")),
        "cassettes": json.loads(_discover(str(observed.cassettes), "--json")),
        "control API": observed.api_json,
    }


def _attempts(agent: AgentSummary, api: str, *, stream: bool | None = None) -> int:
    return sum(s.attempts for s in agent.steps if s.api == api and (stream is None or s.stream is stream))


def test_each_source_inventories_what_the_agent_did(observed: Observed) -> None:
    agent = observed.agent
    assert agent.errors == 0 and agent.http_attempts == 7
    tool_calls = _attempts(agent, "tool")
    for kind, inv in _inventories(observed).items():
        assert inv["source"]["kind"] == kind
        assert inv["exchanges"] == agent.http_attempts, kind
        assert set(inv["providers"]) == {"openai", "anthropic"}, kind
        gpt = inv["providers"]["openai"]["models"]["gpt-4o-mini"]
        assert gpt["calls"] == _attempts(agent, "openai.chat"), kind
        assert gpt["streamed"] == _attempts(agent, "openai.chat", stream=True), kind
        assert gpt["tool_calls"] == {"get_weather": tool_calls}, kind
        claude = inv["providers"]["anthropic"]["models"]["claude-haiku-demo"]
        assert claude["calls"] == claude["streamed"] == _attempts(agent, "anthropic.messages"), kind
        # Every tool call the model asked for was executed against the tool API, with the same arguments.
        weather = inv["llm_tools"]["get_weather"]
        assert weather["calls"] == tool_calls and weather["declared"] and weather["via"] == ["openai"], kind
        assert weather["shapes"] == [{"shape": {"city": "string"}, "calls": tool_calls}], kind
        (api,) = inv["tool_apis"]
        assert (api["path"], api["calls"], api["methods"], api["statuses"]) == (
            "/tools/weather",
            tool_calls,
            {"GET": tool_calls},
            {"200": tool_calls},
        ), kind
        assert api["shapes"] == [{"shape": {"city": "string"}, "calls": tool_calls}], kind
        assert inv["mcp_servers"] == {} and inv["errors"] == [] and inv["faults"] == [], kind
        (session,) = inv["sessions"].values()
        assert session["llm_calls"] == gpt["calls"] + claude["calls"] and session["tool_calls"] == tool_calls, kind
        assert session["input_tokens"] > 0 and session["cost_usd"] > 0, kind
        assert "Paris" not in json.dumps(inv), kind  # the argument's value


def test_the_sources_agree(observed: Observed) -> None:
    views = {kind: {k: v for k, v in inv.items() if k != "source"} for kind, inv in _inventories(observed).items()}
    assert views["exchanges log"] == views["control API"]
    # A cassette keeps what upstream sent, so it reads the same as the live log here (no faults fired).
    assert views["cassettes"] == views["exchanges log"]
    (one,) = observed.cassettes.glob("*.jsonl")  # one session, one cassette file: readable on its own too
    assert json.loads(_discover(str(one), "--json"))["providers"] == views["cassettes"]["providers"]


def test_same_input_same_output(observed: Observed, tmp_path: Path) -> None:
    assert observed.api_text[0] == observed.api_text[1]
    for source in (observed.log, observed.cassettes):
        outputs = []
        for n in (1, 2):
            out = tmp_path / f"run{n}" / "exp.yaml"
            out.parent.mkdir(exist_ok=True)
            text = _discover(str(source), "--out", str(out), "--agent", "python agent.py")
            outputs.append((text, out.read_bytes()))
        assert outputs[0] == outputs[1], source
        assert b"Paris" not in outputs[0][1]


def test_the_generated_experiment_validates(observed: Observed, tmp_path: Path) -> None:
    """`brownout validate` accepts what discover wrote; docs/discovery.md's walkthrough then runs such a
    file end to end (tests/docs/test_discovery_walkthrough.py checks its report phase by phase)."""
    assert BROWNOUT is not None, "brownout is not installed in this virtualenv"
    exp = tmp_path / "exp.yaml"
    agent = f"{{python}} -m brownout.proxy.demo.agent --upstream {shlex.quote(observed.upstream)}"
    _discover(str(observed.log), "--out", str(exp), "--agent", agent, "--runs", "1", "--min-success-rate", "0.3")
    generated = yaml.safe_load(exp.read_text(encoding="utf-8"))
    assert generated["agent"] == {"command": agent, "runs_per_task": 1}
    assert generated["gate"]["min_success_rate"] == 0.3
    env = _clean_env(BROWNOUT_CONFDIR=str(observed.root / "conf"))
    check = subprocess.run([BROWNOUT, "validate", str(exp)], env=env, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0 and "ok (experiment, 10 phases" in check.stdout, check.stdout + check.stderr
