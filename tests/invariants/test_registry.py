from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from pydantic import ValidationError

from brownout.core.registry import build_registry
from brownout.invariants import INVARIANTS, REGISTRY
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.config import parse_invariants
from brownout.invariants.latency_budget import LatencyBudget
from brownout.proxy.config import BrownoutConfig


def test_every_invariant_has_its_test_file() -> None:
    here = Path(__file__).parent
    missing = [name for name in REGISTRY if not (here / f"test_{name}.py").exists()]
    assert missing == []
    assert list(REGISTRY) == [cls.type for cls in INVARIANTS]


def test_every_invariant_has_its_docs_section() -> None:
    # The section's parameter table is checked against the Config model in tests/docs/test_param_tables.py.
    text = (Path(__file__).parents[2] / "docs" / "invariants.md").read_text(encoding="utf-8")
    assert [name for name in REGISTRY if f"\n## {name}\n" not in text] == []


def test_duplicate_types_fail_loudly() -> None:
    class Again(LatencyBudget):
        pass

    with pytest.raises(ValueError, match="duplicate invariant type 'latency_budget'"):
        build_registry("invariant", [LatencyBudget, Again], "Config")


def test_config_type_must_match_the_registry_name() -> None:
    class WrongConfig(InvariantConfigBase):
        type: Literal["other"]

    class Wrong(Invariant):
        type = "wrong"
        Config = WrongConfig

    with pytest.raises(ValueError, match=r"Literal\['wrong'\]"):
        build_registry("invariant", [Wrong], "Config")


def test_unknown_type_lists_the_valid_ones() -> None:
    with pytest.raises(ValidationError) as info:
        BrownoutConfig.model_validate({"invariants": [{"type": "no_such_thing"}]})
    text = str(info.value)
    assert "invariants.0" in text and "unknown invariant type 'no_such_thing'; valid types: " in text
    for name in REGISTRY:
        assert name in text


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"type": "no_pii", "directions": "both"}, "Extra inputs are not permitted"),
        ({"type": "no_pii", "severity": "fatal"}, "'info', 'warning', 'error' or 'critical'"),
        ({"type": "latency_budget"}, "needs total_ms and/or ttfc_ms"),
        ({"type": "call_budget"}, "needs max_calls and/or max_duration_s"),
        ({"type": "token_budget", "max_tokens": 0}, "greater than 0"),
        ({"severity": "error"}, "invariant needs a `type`; valid types: call_budget, "),
        ("no_pii", "invariant must be a mapping with a `type`"),
    ],
)
def test_bad_entries_are_config_errors(entry, error) -> None:
    with pytest.raises(ValidationError, match=error):
        parse_invariants([entry])


def test_names_are_unique_and_configs_frozen() -> None:
    with pytest.raises(ValidationError, match="duplicate invariant name 'latency_budget'"):
        parse_invariants([{"type": "latency_budget", "total_ms": 1}, {"type": "latency_budget", "ttfc_ms": 1}])
    configs = parse_invariants(
        [{"type": "latency_budget", "total_ms": 1}, {"type": "latency_budget", "name": "ttfc", "ttfc_ms": 1}]
    )
    assert [c.key for c in configs] == ["latency_budget", "ttfc"]
    with pytest.raises(ValidationError):
        configs[0].total_ms = 5  # type: ignore[misc]


def test_full_config_round_trip() -> None:
    cfg = BrownoutConfig.model_validate(
        {
            "invariants": [
                {"type": "latency_budget", "total_ms": 30000, "ttfc_ms": 5000, "providers": ["openai"]},
                {"type": "tool_arguments_json", "schema": True},
                {"type": "no_pii", "direction": "both", "allowlist": ["@example\\.com$"]},
                {"type": "no_loop", "max_repeats": 3, "window": 20},
                {"type": "retry_discipline", "max_retries": 2},
                {"type": "token_budget", "max_tokens": 200000},
                {"type": "call_budget", "max_calls": 50, "max_duration_s": 600},
                {"type": "cost_budget", "max_session_usd": 0.5},
                {"type": "stream_complete"},
                {"type": "injection_followed", "markers": ["evil.example"]},
                {"type": "mcp_tools", "checks": ["stale"]},
                {"type": "mcp_reconnect_discipline", "max_per_minute": 10},
                {"type": "tool_policy", "deny": ["delete_*"]},
                {"type": "reconnect_discipline", "max_per_min": 3},
                {"type": "realtime_session_budget", "max_duration_s": 600},
                {"type": "claimed_success", "count_recorded": True},
                {"type": "missing_span", "wire_calls": ["llm"]},
                {"type": "span_mismatch", "token_tolerance_pct": 2},
                {"type": "custom", "callable": "tests.invariants.custom_checks:no_gpt3", "severity": "info"},
            ]
        }
    )
    assert [c.type for c in cfg.invariants] == list(REGISTRY)
    assert cfg.invariants[1].schema_ is True
