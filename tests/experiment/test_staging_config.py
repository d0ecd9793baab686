"""The staging experiment file: `brownout validate`, the schema, and the errors that name field and line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from brownout.proxy.cli import main
from brownout.proxy.experiment.config import ExperimentError
from brownout.proxy.experiment.staging.config import StagingExperiment, parse_any_experiment

STAGING = """\
version: 1
name: gameday
target:
  state: redis://127.0.0.1:6379/0
prometheus:
  url: http://127.0.0.1:9090/
  selector: job="brownout"
phases:
  - name: baseline
    duration_s: 60
  - name: llm-outage
    warmup_s: 10
    duration_s: 120
    rules:
      - name: openai-503
        match: {provider: openai}
        fault: {type: http_error, status: 503}
  - name: from-file
    duration_s: 30
    config: chaos.yaml
steady_state:
  - name: agent success
    metric: promql
    query: sum(rate(agent_requests_total{outcome="ok"}[$window])) / sum(rate(agent_requests_total[$window]))
    op: ">="
    threshold: 0.95
  - {metric: error_rate, op: "<=", threshold: 0.5, scope: during}
abort: {after_breaches: 2}
gate:
  - {metric: faults, op: ">", threshold: 0, scope: during}
"""

CHAOS = """\
version: 1
rules:
  - name: slow
    match: {provider: openai}
    fault: {type: latency, delay_ms: 200}
"""


def validate(tmp_path: Path, text: str) -> tuple[int, str]:
    (tmp_path / "chaos.yaml").write_text(CHAOS, encoding="utf-8")
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.output.replace(str(path), "exp.yaml")


def test_a_good_staging_file(tmp_path: Path) -> None:
    code, output = validate(tmp_path, STAGING)
    assert code == 0, output
    expected = "exp.yaml: ok (staging experiment, 3 timed phases, 1 inline rules, the fleet through its store)"
    assert output.strip() == expected
    config = parse_any_experiment(STAGING, "exp.yaml")
    assert isinstance(config, StagingExperiment)
    assert config.prometheus.url == "http://127.0.0.1:9090" and config.prometheus.selector == 'job="brownout"'
    during = config.steady_state[1]
    assert [config.in_scope(during, i) for i in range(3)] == [False, True, True]
    assert [config.in_scope(config.steady_state[0], i) for i in range(3)] == [True, True, True]


def test_command_shaped_fields_with_a_target_are_errors_naming_field_and_line(tmp_path: Path) -> None:
    text = STAGING.replace("version: 1\n", "version: 1\nagent: {command: python agent.py}\nseed: 3\n", 1)
    text = text.replace("    duration_s: 60\n", "    duration_s: 60\n    repeat: 3\n")
    code, output = validate(tmp_path, text)
    assert code == 1
    assert "exp.yaml:2: agent: not with a target: a staging experiment drives a running deployment" in output
    assert "exp.yaml:3: seed: not with a target: the fleet's own seed decides" in output
    assert "exp.yaml:13: phases[0].repeat: not with a target: a timed phase runs once" in output


def test_timed_fields_without_a_target_are_errors_naming_field_and_line(tmp_path: Path) -> None:
    text = "version: 1\nphases:\n  - name: baseline\n    duration_s: 60\n    warmup_s: 5\nprometheus: {url: http://p}\n"
    code, output = validate(tmp_path, text)
    assert code == 1
    assert "exp.yaml:4: phases[0].duration_s: needs a target" in output
    assert "exp.yaml:5: phases[0].warmup_s: needs a target" in output
    assert "exp.yaml:6: prometheus: needs a target" in output
    assert "exp.yaml:1: agent: required: the agent command the experiment runs (or a target" in output


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("  state: redis://127.0.0.1:6379/0\n", "  state: redis://h/0\n  control: [http://h:9465]\n"),
            "target: Value error, give the fleet's store",
        ),
        (
            ("redis://127.0.0.1:6379/0", "http://127.0.0.1:6379/0"),
            "target.state: Value error, state must start with redis://",
        ),
        (("url: http://127.0.0.1:9090/", "url: http://admin:pw@127.0.0.1:9090/"), "no user or password in the URL"),
        (('job="brownout"', "'{job=\"brownout\"}'"), "prometheus.selector: Value error, label matchers without braces"),
        (
            ('    op: ">="\n    threshold: 0.95\n', '    op: ">="\n    threshold: 0.95\n    phase: nope\n'),
            "unknown phase 'nope'",
        ),
        (("{metric: error_rate,", "{metric: error_rate, query: up,"), "query is for metric promql"),
        (("metric: promql\n    query: sum", "metric: promql\n    quer: sum"), "did you mean 'query'?"),
        (("{metric: faults,", "{metric: fault_count,"), "unknown metric 'fault_count'"),
        (("status: 503", "status: 99"), "exp.yaml:17: phases[1].rules[0].fault.status"),
        (("    duration_s: 120\n", ""), "exp.yaml:11: phases[1].duration_s: Field required"),
    ],
    ids=[
        "two-targets",
        "state-url",
        "credentials",
        "selector",
        "check-phase",
        "figure-query",
        "typo",
        "metric",
        "rule",
        "duration",
    ],
)
def test_bad_fields_are_named(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    assert change[0] in STAGING
    code, output = validate(tmp_path, STAGING.replace(*change))
    assert code == 1 and expected in output, output


def test_a_phase_config_without_rules_is_an_error(tmp_path: Path) -> None:
    code, output = validate(tmp_path, STAGING.replace("config: chaos.yaml", "config: empty.yaml"))
    assert code == 1 and "empty.yaml" in output  # no such file
    (tmp_path / "empty.yaml").write_text("version: 1\n")
    path = tmp_path / "exp.yaml"
    path.write_text(STAGING.replace("config: chaos.yaml", "config: empty.yaml"))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 1 and "phases[2].config: its config has no rules" in result.output


def test_the_schema_documents_the_staging_file() -> None:
    result = CliRunner().invoke(main, ["schema", "--kind", "staging"])
    assert result.exit_code == 0, result.output
    schema = json.loads(result.output)
    assert {"target", "prometheus", "phases", "steady_state", "abort", "gate"} <= set(schema["properties"])
    assert {"state", "state_env", "key_prefix", "control", "token_env", "lease_s"} <= set(
        schema["$defs"]["Target"]["properties"]
    )
    assert {"duration_s", "warmup_s", "rules", "config"} <= set(schema["$defs"]["StagingPhase"]["properties"])
    assert "after_breaches" in schema["$defs"]["StagingAbort"]["properties"]
    assert schema["$defs"]["Check"]["properties"]["query"]["description"].startswith("PromQL")


def test_run_refuses_the_command_shapes_flags_for_a_staging_file(tmp_path: Path) -> None:
    path = tmp_path / "exp.yaml"
    path.write_text(STAGING)
    result = CliRunner().invoke(main, ["experiment", "run", str(path), "--seed", "3"])
    assert result.exit_code == 2 and "--seed: not for an experiment with a target" in result.output
    with pytest.raises(ExperimentError, match="agent: required"):
        parse_any_experiment("version: 1\nphases: [{name: p}]\n", "x.yaml")
