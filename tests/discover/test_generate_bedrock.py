"""Discovery of a Bedrock agent: its models get Bedrock's own failures, and the experiment validates."""

from __future__ import annotations

from pathlib import Path

from brownout.exporters.jsonl import exchange_summary
from brownout.proxy.discover.generate import Options, experiment, experiment_yaml
from brownout.proxy.discover.inventory import Inventory
from brownout.proxy.experiment.check import check_experiment
from tests.invariants.builders import llm

MODEL = "anthropic.claude-3-haiku-20240307-v1:0"


def _bedrock(t: float, **fields: object) -> object:
    return llm(t, provider="bedrock", gen_ai_provider="aws.bedrock", host="bedrock-runtime.us-east-1.amazonaws.com",
               path="/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse-stream", model=MODEL, **fields)  # fmt: skip


def test_a_streamed_bedrock_model_gets_a_mid_stream_throttle_beside_the_429() -> None:
    records = [exchange_summary(_bedrock(0, stream=True, stream_complete=True)), exchange_summary(_bedrock(1))]  # type: ignore[arg-type]
    inv = Inventory.of(records)
    assert list(inv.providers) == ["bedrock"]
    exp = experiment(inv, Options(agent="python agent.py"))
    rules = {r["name"]: r for ph in exp["phases"] for r in ph.get("rules", [])}
    thrown = next(r for name, r in rules.items() if name.startswith("stream-throttled-bedrock"))
    assert thrown["match"] == {"provider": "bedrock", "model": MODEL, "stream": True}
    assert thrown["fault"] == {"type": "http_error", "status": 429, "mid_stream": True, "after_events": 1}
    assert any(r["fault"] == {"type": "http_error", "status": 503} and r["match"]["provider"] == "bedrock"
               for r in rules.values())  # fmt: skip


def test_the_generated_bedrock_experiment_is_valid(tmp_path: Path) -> None:
    records = [exchange_summary(_bedrock(0, stream=True, stream_complete=False))]  # type: ignore[arg-type]
    text = experiment_yaml(experiment(Inventory.of(records), Options(agent="python agent.py")), header=[])
    config = check_experiment(text, "exp.yaml", tmp_path)
    assert [p.name for p in config.phases] == ["baseline", "llm-rate-limit", "llm-server-error", "llm-truncated-stream"]
