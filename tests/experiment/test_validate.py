"""`brownout validate` tells an experiment file from a chaos config by its keys and checks each with its own model."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from brownout.proxy.cli import main

EXPERIMENT = """\
version: 1
name: checked
agent:
  command: python agent.py
phases:
  - name: baseline
  - name: llm
    rules:
      - name: slow
        match: {provider: openai}
        fault: {type: latency, delay_ms: 100}
      - name: broken
        match: {provider: openai}
        fault: {type: http_error, status: 99}
  - name: from-file
    config: chaos.yaml
invariants:
  - {type: retry_discipline}
  - {type: no_such_invariant}
"""

CHAOS = """\
version: 1
rules:
  - name: cut
    match: {stream: true}
    fault: {type: truncate, after_events: -1}
"""


def _validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["validate", str(path)])
    return result.exit_code, result.output


def test_a_good_experiment_file(tmp_path: Path) -> None:
    (tmp_path / "chaos.yaml").write_text(CHAOS.replace("-1", "2"), encoding="utf-8")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT.replace("status: 99", "status: 503").replace("  - {type: no_such_invariant}\n", ""))
    code, output = _validate(exp)
    assert code == 0, output
    assert output.strip() == f"{exp}: ok (experiment, 3 phases, 2 inline rules, seed 0)"


def test_inline_rules_invariants_and_phase_configs_are_checked_with_their_lines(tmp_path: Path) -> None:
    (tmp_path / "chaos.yaml").write_text(CHAOS, encoding="utf-8")
    exp = tmp_path / "exp.yaml"
    exp.write_text(EXPERIMENT, encoding="utf-8")
    code, output = _validate(exp)
    assert code == 1
    lines = output.strip().removeprefix("brownout: ").splitlines()
    assert f"{exp}:14: phases[1].rules[1].fault.status: Input should be greater than or equal to 400" in lines
    assert any(line.startswith(f"{exp}:19: invariants[1]: ") and "no_such_invariant" in line for line in lines)
    assert any(line.startswith(f"{tmp_path / 'chaos.yaml'}:5: rules[0].fault") for line in lines), lines


def test_experiment_fields_name_their_line(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text("version: 1\nagent:\n  command: x\n  runs_per_task: 0\nphases: []\n", encoding="utf-8")
    code, output = _validate(exp)
    assert code == 1
    assert f"{exp}:4: agent.runs_per_task: Input should be greater than or equal to 1" in output
    assert f"{exp}:5: phases:" in output


def test_a_missing_phase_config_is_an_error(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text("agent: {command: x}\nphases:\n  - {name: p, config: nowhere.yaml}\n", encoding="utf-8")
    code, output = _validate(exp)
    assert code == 1 and "nowhere.yaml" in output and "cannot read" in output


def test_a_chaos_config_is_still_a_chaos_config(tmp_path: Path) -> None:
    chaos = tmp_path / "chaos.yaml"
    chaos.write_text(CHAOS, encoding="utf-8")
    code, output = _validate(chaos)
    assert code == 1 and f"{chaos}:5: rules[0].fault.after_events" in output
    chaos.write_text(CHAOS.replace("-1", "2"), encoding="utf-8")
    assert _validate(chaos) == (0, f"{chaos}: ok (1 rules, seed 0)\n")


def test_keys_that_are_not_names_point_at_their_line(tmp_path: Path) -> None:
    exp = tmp_path / "exp.yaml"
    exp.write_text("agent: {command: x}\n? \nphases:\n  - name: p\n    rules: [{? : 1}]\n", encoding="utf-8")
    code, output = _validate(exp)
    assert code == 1
    lines = output.strip().removeprefix("brownout: ").splitlines()
    assert f"{exp}:2: a key is empty (null): every key must be a name" in lines
    assert f"{exp}:5: phases[0].rules[0]: a key is empty (null): every key must be a name" in lines
