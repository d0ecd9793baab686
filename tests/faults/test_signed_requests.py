"""brownout never alters a signed request: such rules are refused at load, and skipped if they fire anyway."""

from __future__ import annotations

from pathlib import Path

import pytest

from brownout.core.wire import BUILTIN
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import ConfigError, load_config
from tests.faults.engine_support import engine, ex


def test_a_request_editing_fault_on_a_bedrock_exchange_is_skipped_and_the_body_kept() -> None:
    wire = BUILTIN.by_provider("bedrock")
    plan = engine({"name": "tagger", "match": {}, "fault": {"type": "tag", "text": "+"}}).plan(
        ex(provider="bedrock", path="/model/m/converse"), wire
    )
    assert plan.edits_request()
    body = b'{"messages":[]}'
    assert plan.edit_request(body, {}) is body
    (skipped,) = plan.exchange.faults_skipped  # type: ignore[union-attr]
    assert skipped.rule == "tagger" and "signed" in skipped.params["skipped"] and plan.fired == []


def test_the_same_fault_edits_an_unsigned_request() -> None:
    plan = engine({"name": "tagger", "match": {}, "fault": {"type": "tag", "text": "+"}}).plan(
        ex(), BUILTIN.by_provider("openai")
    )
    assert plan.edit_request(b"{}", {}) == b"{}+"


def test_mutate_on_bedrock_is_refused_at_load_with_the_line_and_why(tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(
        "version: 1\nrules:\n  - name: ok\n    match: {provider: bedrock}\n    fault: {type: latency, delay_ms: 5}\n"
        "  - name: typos\n    match: {provider: bedrock}\n    fault: {type: mutate, kind: typos}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(path, model=BrownoutConfig)
    text = str(err.value)
    assert "chaos.yaml:6" in text and "rules[1]" in text
    assert "rewrites the request" in text and "signed (AWS SigV4)" in text and "never alters a signed request" in text


def test_a_mutate_rule_that_names_no_provider_loads() -> None:
    config = BrownoutConfig.model_validate(
        {"version": 1, "rules": [{"name": "m", "fault": {"type": "mutate", "kind": "typos"}}]}
    )
    assert config.rules[0].fault_type == "mutate"
    assert BUILTIN.signed_providers == {"bedrock"}
