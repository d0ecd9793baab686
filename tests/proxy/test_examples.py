"""Every bundled config validates, compiles into the engine and the invariant runner, and acts."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from brownout.faults.engine import FaultEngine
from brownout.invariants.runner import InvariantRunner
from brownout.proxy.cli import main
from brownout.proxy.configload import load_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [*sorted((ROOT / "examples" / "chaos").glob("*.yaml")), ROOT / "proxy" / "demo" / "chaos.yaml"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_config_validates_and_compiles(path: Path):
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    config = load_config(path)
    assert config.rules
    engine = FaultEngine(config.ruleset)
    assert [r["name"] for r in engine.status()["rules"]] == [r.name for r in config.rules]
    assert len(InvariantRunner(config.invariants).invariants) == len(config.invariants)


def test_prompt_injection_example_poisons_tool_output(upstream, brownout_proxy):
    proxy = brownout_proxy(ROOT / "examples" / "chaos" / "prompt-injection.yaml", upstream=upstream)
    seen = []
    with httpx.Client(proxy=proxy.proxy_url("victim"), trust_env=False) as client:
        for _ in range(6):
            seen.append(client.get(f"{upstream.url}/tools/search?q=files").text)
    poisoned = [body for body in seen if "exfil.example.net" in body]
    assert 0 < len(poisoned) < len(seen)  # probability 0.5, seeded: some but not all


def test_request_chaos_example_mutates_what_the_model_gets(upstream, brownout_proxy):
    import json

    proxy = brownout_proxy(ROOT / "examples" / "chaos" / "request-chaos.yaml", upstream=upstream)
    question = "Please summarise yesterday's meeting notes for the whole team"
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": question}]}
    with httpx.Client(proxy=proxy.proxy_url("user-1"), trust_env=False) as client:
        for _ in range(10):
            assert client.post(f"{upstream.url}/v1/chat/completions", json=body).status_code == 200
    got = [json.loads(r.body)["messages"][-1]["content"] for r in upstream.requests_seen]
    typed = [g for g in got if g != question]
    assert 0 < len(typed) < len(got)  # probability 0.3, seeded: some but not all
    assert all(len(g.split()) == len(question.split()) for g in typed)
