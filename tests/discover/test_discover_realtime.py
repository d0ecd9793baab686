"""`brownout discover` on realtime sessions: the openai SDK's realtime client and google-genai's live client
through the real proxy, with an exchanges log and cassettes. Both sources list the sessions, their models,
generations, tool calls and how they ended; the generated experiment aims event faults at each provider's
own event names, and a generated rule, run, does to a session what it says."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.discover.generate import Options, experiment, experiment_yaml
from brownout.proxy.discover.inventory import Inventory
from brownout.proxy.discover.sources import read_source
from brownout.proxy.embed import ProxyHandle
from brownout.proxy.experiment.check import check_experiment
from tests.proxy.realtime_clients import (
    Recorder,
    ask_weather,
    gemini_session,
    gemini_weather_turn,
    openai_realtime,
    proxy_environment,
    wait_for,
)

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def observed(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> tuple[Path, Path]:
    """An exchanges log and cassettes of one OpenAI Realtime and one Gemini Live conversation (a tool call each)."""
    log, cassettes = tmp_path / "exchanges.jsonl", tmp_path / "cassettes"
    proxy = brownout_proxy(
        f"seed: 1\nrecord: {{dir: {cassettes}}}\nexporters: {{jsonl: {{exchanges_path: {log}}}}}\n",
        upstream=upstream_tls,
    )
    proxy_environment(monkeypatch, proxy)
    rec = Recorder(proxy)
    with openai_realtime(upstream_tls) as conn:
        ask_weather(conn)
    gemini_session(upstream_tls, gemini_weather_turn)
    assert wait_for(lambda: len(rec.sessions()) == 2 and len(rec.generations()) == 4)
    assert wait_for(lambda: log.exists() and len(log.read_text().splitlines()) == 6)
    proxy.addon.tape.close()
    return log, cassettes


def _discover(*args: str) -> str:
    result = CliRunner().invoke(main, ["discover", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_each_source_lists_the_realtime_sessions(observed: tuple[Path, Path]) -> None:
    for source in observed:
        inv = json.loads(_discover(str(source), "--json"))
        rt = inv["realtime"]
        assert set(rt) == {"openai_realtime", "gemini_live"}, source
        openai, gemini = rt["openai_realtime"], rt["gemini_live"]
        assert (openai["sessions"], openai["models"]) == (1, {"gpt-realtime": 1}), source
        assert (gemini["sessions"], gemini["models"]) == (1, {"gemini-live-2.5-flash": 1}), source
        for one in (openai, gemini):
            assert one["generations"] == {"completed": 2}, source
            assert one["tool_calls"] == {"get_weather": 1} and one["refused"] == {}, source
            assert 0 < one["longest_s"] < 30, source
        assert openai["closes"] == {"1000 by client": 1}, source
        # Generations are the LLM calls; the WebSocket itself is none.
        assert inv["providers"]["openai_realtime"]["models"]["gpt-realtime"]["calls"] == 2, source
        assert inv["providers"]["openai_realtime"]["operations"] == {"realtime": 2}, source
        weather = inv["llm_tools"]["get_weather"]
        assert weather["declared"] and weather["via"] == ["gemini_live", "openai_realtime"], source
        assert weather["shapes"] == [{"shape": {"city": "string"}, "calls": 2}], source
        text = _discover(str(source))
        assert "Realtime sessions (WebSocket)\n  gemini_live: 1 session on " in text, source
        assert "generations (completed x2)\n    models: gpt-realtime x1; longest session" in text, source
        assert "    ended: 1000 by client x1\n    tool calls: get_weather x1\n" in text, source
    by_source = [json.loads(_discover(str(s), "--json")) for s in observed]
    for inv in by_source:
        for rt in inv["realtime"].values():
            rt.pop("longest_s")  # the log times the session at the proxy, the cassette at its last message
    assert by_source[0]["realtime"] == by_source[1]["realtime"]


def test_a_refused_upgrade_is_a_refused_session_not_an_llm_call(
    brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from websockets.exceptions import InvalidStatus

    log = tmp_path / "exchanges.jsonl"
    refuse = "rules:\n  - {name: busy, match: {provider: openai_realtime}, fault: {type: http_error, status: 429}}\n"
    proxy = brownout_proxy(f"seed: 1\nexporters: {{jsonl: {{exchanges_path: {log}}}}}\n{refuse}", upstream=upstream_tls)
    proxy_environment(monkeypatch, proxy)
    with pytest.raises(InvalidStatus), openai_realtime(upstream_tls):
        pass
    assert wait_for(lambda: log.exists() and log.read_text().strip())
    inv = json.loads(_discover(str(log), "--json"))
    assert inv["realtime"]["openai_realtime"]["refused"] == {"429": 1}
    assert inv["realtime"]["openai_realtime"]["sessions"] == 0 and inv["providers"] == {}


def test_the_generated_experiment_aims_at_each_providers_events(observed: tuple[Path, Path], tmp_path: Path) -> None:
    inv = Inventory.of(read_source(str(observed[0])).records)
    exp = experiment(inv, Options(agent="python voice_agent.py"))
    phases = {p["name"]: p.get("rules", []) for p in exp["phases"]}
    assert {"realtime-session-cap", "realtime-error-event", "realtime-truncated-generation", "realtime-reset"} <= set(
        phases
    )
    events = {r["match"]["provider"]: r["match"]["event"] for r in phases["realtime-session-cap"]}
    assert events == {"openai_realtime": "response.created", "gemini_live": "serverContent"}
    broken = {r["match"]["provider"]: r for r in phases["realtime-malformed-tool-arguments"]}
    assert broken["openai_realtime"]["match"]["event"] == "response.function_call_arguments.done"
    assert broken["gemini_live"]["match"] == {
        "provider": "gemini_live",
        "model": "gemini-live-2.5-flash",
        "event": "toolCall",
        "tool": "get_weather",
    }
    # The stream and tool-argument phases of request/response APIs leave the realtime ones alone.
    assert not any(r["match"]["provider"] == "openai_realtime" for r in phases.get("llm-truncated-stream", []))
    kinds = [i["type"] for i in exp["invariants"]]
    assert "reconnect_discipline" in kinds and "realtime_session_budget" in kinds
    config = check_experiment(experiment_yaml(exp, header=[]), "exp.yaml", tmp_path)
    assert any(p.name == "realtime-session-cap" for p in config.phases)


def test_a_generated_rule_does_what_it_says(
    observed: tuple[Path, Path], brownout_proxy: Callable[..., ProxyHandle], upstream_tls: Any, monkeypatch: Any
) -> None:
    """The malformed tool arguments rule discover wrote for OpenAI Realtime, run: the SDK gets arguments
    that do not parse."""
    exp = experiment(Inventory.of(read_source(str(observed[0])).records), Options(agent="x", probability=1.0))
    phases = {p["name"]: p.get("rules", []) for p in exp["phases"]}
    (rule,) = [r for r in phases["realtime-malformed-tool-arguments"] if r["match"]["provider"] == "openai_realtime"]
    proxy = brownout_proxy(f"seed: 1\nrules: [{json.dumps(rule)}]\n", upstream=upstream_tls)
    proxy_environment(monkeypatch, proxy)
    with openai_realtime(upstream_tls) as conn:
        calls, _ = ask_weather(conn)
    done = next(e for e in calls if e.type == "response.function_call_arguments.done")
    with pytest.raises(ValueError):
        json.loads(done.arguments)
