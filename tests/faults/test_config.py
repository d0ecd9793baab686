"""Rule config: field validation, fault dispatch through the registry, unique names."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import TypeAdapter, ValidationError

from brownout import faults
from brownout.faults.config import MatchConfig, QuotaConfig, RuleConfig, Rules, ScheduleConfig
from brownout.proxy.config import BrownoutConfig

ISSUE_EXAMPLE = {
    "version": 1,
    "seed": 42,
    "rules": [
        {
            "name": "openai-429",
            "match": {"provider": "openai", "path": "/v1/chat/*", "model": "gpt-4o*", "stream": False},
            "fault": {"type": "http_error", "status": 429, "retry_after_s": 2},
            "schedule": {"probability": 0.3, "after": 2, "max_injections": 10},
        }
    ],
}


def errors(exc: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(map(str, e["loc"])), e["msg"]) for e in exc.errors()]


def test_issue_example_parses_into_the_fault_params_model() -> None:
    cfg = BrownoutConfig.model_validate(ISSUE_EXAMPLE)
    rule = cfg.rules[0]
    assert isinstance(rule.fault, faults.REGISTRY["http_error"].Params)
    assert rule.fault_type == "http_error"
    assert rule.schedule.probability == 0.3 and rule.schedule.max_injections == 10
    # dumping keeps the concrete fault fields, and the dump validates again
    dumped = cfg.model_dump()
    assert dumped["rules"][0]["fault"]["status"] == 429
    assert BrownoutConfig.model_validate(dumped) == cfg


def test_unknown_fault_type_lists_the_valid_types() -> None:
    with pytest.raises(ValidationError) as ei:
        RuleConfig.model_validate({"name": "r", "fault": {"type": "lag", "delay_ms": 5}})
    [(loc, msg)] = errors(ei.value)
    assert loc == "fault"
    assert "'lag'" in msg
    for name in faults.REGISTRY:
        assert name in msg


def test_missing_fault_type_lists_the_valid_types() -> None:
    with pytest.raises(ValidationError) as ei:
        RuleConfig.model_validate({"name": "r", "fault": {"delay_ms": 5}})
    [(loc, msg)] = errors(ei.value)
    assert loc == "fault" and "latency" in msg


def test_fault_param_errors_name_the_nested_field() -> None:
    with pytest.raises(ValidationError) as ei:
        BrownoutConfig.model_validate({"rules": [{"name": "r", "fault": {"type": "latency", "delay_ms": "soon"}}]})
    assert [loc for loc, _ in errors(ei.value)] == ["rules.0.fault.delay_ms"]


@pytest.mark.parametrize(
    ("rule", "loc"),
    [
        ({"match": {"hots": "x"}}, "match.hots"),
        ({"match": {"provider": "azure"}}, "match.provider"),
        ({"schedule": {"probability": 1.5}}, "schedule.probability"),
        ({"schedule": {"after": -1}}, "schedule.after"),
        ({"schedule": {"every": 0}}, "schedule.every"),
        ({"schedule": {"scope": "user"}}, "schedule.scope"),
        ({"schedule": {"starts_at": "2026-01-01T00:00:00"}}, "schedule.starts_at"),
        ({"schedule": {"period_s": 10, "active_s": 20}}, "schedule"),
        ({"schedule": {"period_s": 10}}, "schedule"),
        ({"schedule": {"start_s": 5, "starts_at": "2026-01-01T00:00:00Z"}}, "schedule"),
        ({"schedule": {"quota": {}}}, "schedule.quota"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_fields_are_named(rule: dict[str, object], loc: str) -> None:
    data = {"name": "r", "fault": {"type": "reset"}, **rule}
    with pytest.raises(ValidationError) as ei:
        RuleConfig.model_validate(data)
    assert loc in [where for where, _ in errors(ei.value)]


def test_active_s_above_period_s_explains_itself() -> None:
    with pytest.raises(ValidationError, match=r"active_s \(20.0\) must be <= period_s \(10.0\)"):
        ScheduleConfig(period_s=10, active_s=20)


def test_starts_at_must_carry_a_timezone() -> None:
    s = ScheduleConfig.model_validate({"starts_at": "2026-01-01T00:00:00+00:00"})
    assert s.starts_at_ts == datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def test_fault_may_be_omitted_only_with_a_quota() -> None:
    rule = RuleConfig.model_validate({"name": "q", "schedule": {"quota": {"requests_per_min": 5}}})
    assert rule.fault is None and rule.fault_type == "quota"
    with pytest.raises(ValidationError, match=r"needs a fault .*latency.* unless schedule\.quota"):
        RuleConfig.model_validate({"name": "r"})


def test_quota_needs_a_limit() -> None:
    assert QuotaConfig(tokens_per_min=100).requests_per_min is None
    with pytest.raises(ValidationError, match="requests_per_min and/or tokens_per_min"):
        QuotaConfig()


def test_header_names_are_lower_cased() -> None:
    assert MatchConfig(header={"X-Brownout-Session": "a*"}).header == {"x-brownout-session": "a*"}


def test_rules_are_frozen() -> None:
    rule = RuleConfig.model_validate({"name": "r", "fault": {"type": "reset"}})
    with pytest.raises(ValidationError):
        rule.name = "other"  # type: ignore[misc]


def test_rules_type_rejects_duplicate_names() -> None:
    adapter = TypeAdapter(Rules)
    ok = adapter.validate_python([{"name": "a", "fault": {"type": "reset"}}, {"name": "b", "fault": {"type": "reset"}}])
    assert [r.name for r in ok] == ["a", "b"]
    with pytest.raises(ValidationError, match="rule names must be unique; duplicated: a"):
        adapter.validate_python([{"name": "a", "fault": {"type": "reset"}}, {"name": "a", "fault": {"type": "hang"}}])
