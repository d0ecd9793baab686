"""The generated experiment: one phase per fault family, rules that match what was observed, relevant invariants."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from brownout.faults.config import MatchConfig
from brownout.faults.match import CompiledMatch, Stage
from brownout.proxy.cli import main
from brownout.proxy.discover.generate import INJECTION_MARKER, Options, experiment, experiment_yaml
from brownout.proxy.discover.inventory import Inventory
from brownout.proxy.experiment.check import check_experiment
from tests.discover.traffic import exchanges, records

OPTIONS = Options(agent="python agent.py", runs=3, probability=0.25, min_success_rate=0.7)


def generated() -> dict[str, Any]:
    return experiment(Inventory.of(records()), OPTIONS)


def phases() -> dict[str, list[dict[str, Any]]]:
    return {p["name"]: p.get("rules", []) for p in generated()["phases"]}


def matches(rule: dict[str, Any], exchange: Any) -> bool:
    """Whether the proxy's own matcher would select `exchange` for `rule`."""
    compiled = CompiledMatch(MatchConfig(**rule["match"]))
    stage = compiled.request_stage(exchange)
    return stage is Stage.YES or (stage is Stage.DEFER and compiled.response_match(exchange) is not None)


def test_a_baseline_then_one_phase_per_family() -> None:
    assert list(phases()) == [
        "baseline",
        "llm-rate-limit",
        "llm-server-error",
        "llm-truncated-stream",
        "llm-malformed-tool-arguments",
        "tools-latency",
        "tools-error",
        "tools-reset",
        "tools-malformed-result",
        "tools-injection",
    ]
    assert phases()["baseline"] == []
    for rules in list(phases().values())[1:]:
        assert all(r["schedule"] == {"probability": 0.25} for r in rules)
        assert len({r["name"] for r in rules}) == len(rules)


def test_every_rule_matches_what_it_was_made_from_and_nothing_else() -> None:
    observed = exchanges()
    for phase, rules in phases().items():
        for rule in rules:
            hits = [ex for ex in observed if matches(rule, ex)]
            assert hits, f"{phase}/{rule['name']} matches no observed exchange"
    by_name = {r["name"]: r for rules in phases().values() for r in rules}
    gpt4o = by_name["rate-limit-openai-gpt-4o"]
    # A model name with glob characters is matched literally: the rule for one never takes the other.
    assert [ex.model for ex in observed if matches(gpt4o, ex)] == ["gpt-4o", "gpt-4o", "gpt-4o"]
    odd = by_name["rate-limit-openai-ft-gpt-4o-eu"]
    assert [ex.model for ex in observed if matches(odd, ex)] == ["ft:gpt-4o[eu]*"]


def test_targets_per_family() -> None:
    p = phases()
    targets = lambda phase: sorted(tuple(sorted(r["match"].items())) for r in p[phase])
    llm = [
        (("model", "claude-3-5-haiku"), ("provider", "anthropic")),
        (("model", "ft:gpt-4o[[]eu][*]"), ("provider", "openai")),
        (("model", "gpt-4o"), ("provider", "openai")),
    ]
    assert targets("llm-rate-limit") == targets("llm-server-error") == llm
    assert {r["fault"]["status"] for r in p["llm-rate-limit"]} == {429}
    assert all(r["fault"]["retry_after_s"] > 0 for r in p["llm-rate-limit"])
    assert {r["match"]["provider"]: r["fault"]["status"] for r in p["llm-server-error"]} == {
        "anthropic": 529,
        "openai": 503,
    }
    assert all(r["match"]["stream"] is True and r["fault"]["type"] == "truncate" for r in p["llm-truncated-stream"])
    assert sorted((r["match"]["model"], r["match"]["tool"]) for r in p["llm-malformed-tool-arguments"]) == [
        ("claude-3-5-haiku", "lookup"),
        ("gpt-4o", "get_weather"),
    ]
    tools = [
        (("host", "tools.example.com"), ("path", "/v1/notes")),
        (("host", "tools.example.com"), ("path", "/v1/search")),
        (("mcp_method", "tools/call"), ("tool", "get_weather")),
    ]
    for phase in ("tools-latency", "tools-error", "tools-reset", "tools-malformed-result", "tools-injection"):
        assert targets(phase) == tools, phase
    errors = {r["match"].get("tool", "api"): r["fault"] for r in p["tools-error"]}
    assert errors["get_weather"] == {"type": "http_error", "error_type": "tool_error"}  # MCP: an isError result
    assert errors["api"] == {"type": "http_error", "status": 503}
    assert all(INJECTION_MARKER in r["fault"]["text"] for r in p["tools-injection"])


def test_invariants_that_apply() -> None:
    invariants = {i["type"]: i for i in generated()["invariants"]}
    assert set(invariants) == {
        "tool_arguments_json",
        "no_loop",
        "tool_policy",
        "mcp_tools",
        "retry_discipline",
        "call_budget",
        "stream_complete",
        "token_budget",
        "cost_budget",
        "injection_followed",
    }
    assert invariants["tool_policy"]["allow"] == ["get_weather", "lookup", "noop", "notes", "search", "send_email"]
    assert invariants["injection_followed"]["markers"] == [INJECTION_MARKER]
    assert invariants["call_budget"]["max_calls"] == 15  # session s1 made 5 LLM calls
    assert invariants["cost_budget"]["max_session_usd"] == 0.012  # s1 cost $0.004
    assert invariants["token_budget"]["max_tokens"] == 3 * (15 + 15 + 100 + 46)


def test_agent_and_gate() -> None:
    exp = generated()
    assert exp["agent"] == {"command": "python agent.py", "runs_per_task": 3}
    assert exp["gate"] == {"min_success_rate": 0.7, "max_violations": {"critical": 0}}
    assert "services" not in exp


def test_the_generated_file_is_a_valid_experiment(tmp_path: Path) -> None:
    text = experiment_yaml(generated(), header=["a header", "", "second line"])
    assert text.startswith("# a header\n#\n# second line\nversion: 1\n")
    assert "&id" not in text and "*id" not in text  # every rule spelled out, no YAML anchors and aliases
    config = check_experiment(text, "exp.yaml", tmp_path)
    assert len(config.phases) == 10 and config.gate.min_success_rate == 0.7
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "ok (experiment, 10 phases" in result.output


def test_less_traffic_fewer_phases() -> None:
    only_api = experiment(Inventory.of([r for r in records() if r["provider"] == "http"]), OPTIONS)
    assert [p["name"] for p in only_api["phases"]][1:2] == ["tools-latency"]
    assert {i["type"] for i in only_api["invariants"]} == {"tool_policy", "injection_followed"}
    nothing = experiment(Inventory.of([]), OPTIONS)
    assert nothing["phases"] == [{"name": "baseline"}] and nothing["invariants"] == []
    assert nothing["gate"] == {"max_violations": {"critical": 0}}  # no chaos phase: no success rate to gate on
    check_experiment(yaml.safe_dump(nothing), "empty.yaml", Path("."))


def test_same_inventory_same_bytes() -> None:
    a = experiment_yaml(experiment(Inventory.of(records()), OPTIONS), header=["h"])
    b = experiment_yaml(experiment(Inventory.of(list(reversed(records()))), OPTIONS), header=["h"])
    assert a == b


def test_out_needs_an_agent(tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    log.write_text("", encoding="utf-8")
    result = CliRunner().invoke(main, ["discover", str(log), "--out", str(tmp_path / "exp.yaml")])
    assert result.exit_code == 2 and "--agent" in result.output


def test_a_bad_log_line_is_named(tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    log.write_text('{"provider": "openai", "session": "s"}\nnot json\n{"provider": "http", "session": "s"}\n')
    result = CliRunner().invoke(main, ["discover", str(log)])
    assert result.exit_code == 1 and f"{log}:2: not a JSON line" in result.output


def test_a_half_written_last_line_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "exchanges.jsonl"
    log.write_text('{"provider": "openai", "session": "s", "model": "m"}\n{"provider": "ope')
    result = CliRunner().invoke(main, ["discover", str(log), "--json"])
    assert result.exit_code == 0 and '"exchanges": 1' in result.output
