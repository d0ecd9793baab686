"""Config loading: every error names the file, the YAML line and the field path."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import ConfigError, load_config, parse_config

BAD = """\
seed: 1
rules:
  - name: ok
    fault: {type: latency, delay_ms: 5}
  - name: bad-status
    fault:
      type: http_error
      status: 200
"""


def test_good_file(tmp_path: Path) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text("seed: 7\nrules:\n  - name: slow\n    fault: {type: latency, delay_ms: 5}\n")
    config = load_config(path)
    assert isinstance(config, BrownoutConfig)
    assert config.seed == 7 and config.rules[0].name == "slow"


@pytest.mark.parametrize("text", ["", "\n# only a comment\n", "---\n"])
def test_empty_document_means_defaults(text: str) -> None:
    assert parse_config(text) == BrownoutConfig()


def test_error_names_file_line_and_field() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BAD, source="chaos.yaml")
    assert str(info.value) == "chaos.yaml:8: rules[1].fault.status: Input should be greater than or equal to 400"
    (problem,) = info.value.problems
    assert (problem.line, problem.field) == (8, "rules[1].fault.status")


def test_every_error_is_reported() -> None:
    text = "seed: x\nproxy:\n  capture_max_bytes: -1\n  bogus: 1\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="c.yaml")
    lines = str(info.value).splitlines()
    assert lines[:2] == [
        "c.yaml:1: seed: Input should be a valid integer, unable to parse string as an integer",
        "c.yaml:3: proxy.capture_max_bytes: Input should be greater than or equal to 0",
    ]
    # a key nothing like a field lists the section's fields
    assert lines[2].startswith("c.yaml:4: proxy.bogus: Extra inputs are not permitted; valid fields: ")
    assert "capture_max_bytes" in lines[2]


TYPOS = """\
rules:
  - name: limited
    fault:
      type: http_error
      status: 429
      retry_after: 3
    schedule: {probablity: 0.5}
exporters:
  prometheus:
    enabld: false
invariants:
  - {type: no_pii, directon: both}
"""


def test_unknown_keys_get_a_did_you_mean_with_field_and_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(TYPOS, source="c.yaml")
    assert str(info.value).splitlines() == [
        "c.yaml:6: rules[0].fault.retry_after: Extra inputs are not permitted; did you mean 'retry_after_s'?",
        "c.yaml:7: rules[0].schedule.probablity: Extra inputs are not permitted; did you mean 'probability'?",
        "c.yaml:12: invariants[0].directon: Extra inputs are not permitted; did you mean 'direction'?",
        "c.yaml:10: exporters.prometheus.enabld: Extra inputs are not permitted; did you mean 'enabled'?",
    ]


def test_a_top_level_typo_is_hinted_once() -> None:
    # the top level is validated twice (once more with its plugins' catalogue): one hint, not two
    with pytest.raises(ConfigError) as info:
        parse_config("version: 1\nrulez: []\n", source="c.yaml")
    assert str(info.value) == "c.yaml:2: rulez: Extra inputs are not permitted; did you mean 'rules'?"


def test_an_experiment_file_typo_is_hinted(tmp_path: Path) -> None:
    from brownout.proxy.experiment.config import ExperimentError, load_experiment

    path = tmp_path / "exp.yaml"
    path.write_text("agent:\n  command: ['true']\n  runs_per_taks: 2\nphases:\n  - name: base\n")
    with pytest.raises((ConfigError, ExperimentError)) as info:
        load_experiment(path)
    assert f"{path}:3: agent.runs_per_taks: Extra inputs are not permitted; did you mean 'runs_per_task'?" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("rules:\n  - name: x\n    fault: {type: latncy}\n", "c.yaml:3: rules[0].fault: unknown fault type 'latncy'"),
        ("invariants:\n  - {type: latency_budgt}\n", "c.yaml:2: invariants[0]: unknown invariant type 'latency_budgt'"),
    ],
)
def test_unknown_fault_and_invariant_types_read_alike(entry: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(entry, source="c.yaml")
    text = str(info.value)
    assert text.startswith(message + " (did you mean '"), text
    assert "?); valid types: " in text


def test_secret_headers_are_header_names_kept_lower_case() -> None:
    config = parse_config("proxy: {secret_headers: [X-Tenant-Pass]}\n")
    assert config.proxy.secret_headers == ["x-tenant-pass"]
    with pytest.raises(ConfigError) as info:
        parse_config("proxy:\n  secret_headers: ['x tenant: pass']\n", source="c.yaml")
    assert str(info.value).startswith("c.yaml:2: proxy.secret_headers: Value error, a header name such as")


def test_missing_field_points_at_its_parent() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("rules:\n  - enabled: true\n    fault: {type: latency, delay_ms: 5}\n", source="c.yaml")
    assert str(info.value) == "c.yaml:2: rules[0].name: Field required"


def test_unknown_fault_type_lists_valid_types() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("rules:\n  - name: x\n    fault:\n      type: nope\n", source="c.yaml")
    message = str(info.value)
    assert message.startswith("c.yaml:3: rules[0].fault: ")
    assert "nope" in message and "latency" in message and "http_error" in message


class _Latency(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["latency"]
    delay_ms: int = Field(ge=0)


class _Error(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["http_error"]
    status: int = Field(ge=400)


class _Doc(BaseModel):
    faults: list[Annotated[_Latency | _Error, Field(discriminator="type")]] = []


def test_discriminated_union_tags_are_skipped_when_walking_the_yaml() -> None:
    # pydantic puts the union member tag into the location; it has no node in the YAML
    text = "faults:\n  - type: latency\n    delay_ms: 1\n  - type: http_error\n    status: 3\n  - type: bogus\n"
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="d.yaml", model=_Doc)
    lines = str(info.value).splitlines()
    assert lines[0] == "d.yaml:5: faults[1].status: Input should be greater than or equal to 400"
    # pydantic's own text for an unknown tag lists the valid ones; keep it
    assert lines[1].startswith("d.yaml:6: faults[2]: Input tag 'bogus'")
    assert "'latency', 'http_error'" in lines[1]


def test_yaml_syntax_error_has_a_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("seed: 1\nrules:\n  - name: [unclosed\n  - name: b\n", source="s.yaml")
    message = str(info.value)
    assert message.startswith("s.yaml:4: YAML syntax error:"), message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- 1\n- 2\n", "l.yaml:1: the file must be a mapping of settings (`version: 1`, ...), not a list"),
        (
            "\n\nhello\n",
            "l.yaml:3: the file must be a mapping of settings (`version: 1`, ...), not the single value 'hello'",
        ),
    ],
)
def test_not_a_mapping(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="l.yaml")
    assert str(info.value) == expected


NULL_KEY = "a key is empty (null): every key must be a name"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("?\n", f"k.yaml:1: {NULL_KEY}"),  # the whole file: a mapping with one null key
        ("version: 1\n? \nseed: 2\n", f"k.yaml:2: {NULL_KEY}"),
        ("version: 1\n1: x\n", "k.yaml:2: key 1 is a number, not a name; quote it if it is meant as one"),
        ("on: 1\n", "k.yaml:1: key True is a boolean, not a name; quote it if it is meant as one"),
        ("version: 1\nproxy:\n  ? \n", f"k.yaml:3: proxy: {NULL_KEY}"),
        (
            "rules:\n  - name: a\n    match: {1: x}\n    fault: {type: latency, delay_ms: 5}\n",
            "k.yaml:3: rules[0].match: key 1 is a number, not a name; quote it if it is meant as one",
        ),
    ],
)
def test_a_key_that_is_not_a_name_is_a_config_error_at_its_line(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="k.yaml")
    assert str(info.value) == expected


def test_a_mapping_with_a_key_that_is_not_a_string_fails_validation_not_construction() -> None:
    # BrownoutConfig has its own __init__, to which pydantic passes the mapping as keywords
    with pytest.raises(ValidationError) as info:
        BrownoutConfig.model_validate({None: 1, 2: 3, "seed": 1})
    assert [(e["type"], e["loc"]) for e in info.value.errors()] == [("invalid_key", ("None",)), ("invalid_key", (2,))]


def test_unreadable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "rules:\n  - name: a\n    fault: {type: latency, delay_ms: 5}\nseed: 3\nrules: []\n",
            "d.yaml:5: rules: written twice (first on line 1); only the last would count",
        ),
        (
            "rules:\n  - name: a\n    fault: {type: latency, delay_ms: 5, 'delay_ms': 6}\n",
            "d.yaml:3: rules[0].fault.delay_ms: written twice (first on line 3); only the last would count",
        ),
    ],
)
def test_a_key_written_twice_is_an_error(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, source="d.yaml")
    assert str(info.value) == expected


def test_aliases_and_merge_keys_are_not_duplicates() -> None:
    text = "rules:\n  - name: a\n    fault: &slow {type: latency, delay_ms: 5}\n  - name: b\n    fault: *slow\n"
    config = parse_config(text)
    assert [r.fault.type for r in config.rules] == ["latency", "latency"]
    merged = "rules:\n  - &base {name: a, fault: {type: latency, delay_ms: 5}}\n  - <<: *base\n    name: b\n"
    assert [r.name for r in parse_config(merged).rules] == ["a", "b"]
