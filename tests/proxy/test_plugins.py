"""Plugins (proxy/plugins.py): each config's own catalogue, loading from config, errors."""

from __future__ import annotations

from typing import Literal

import pytest

from brownout import faults, invariants
from brownout.core import wire
from brownout.core.guard import Guard
from brownout.core.wire.base import RequestInfo
from brownout.exporters.hub import Exporters
from brownout.faults.base import FaultParams
from brownout.faults.engine import FaultEngine
from brownout.faults.latency import LatencyFault
from brownout.proxy.configload import ConfigError, parse_config
from brownout.proxy.plugins import BUILTIN

FAILING = "tests.reliability.failing_plugin"


class _LatencyAgainParams(FaultParams):
    type: Literal["latency"]


class _LatencyAgain(LatencyFault):
    Params = _LatencyAgainParams


clashing_plugin = type("P", (), {"faults": [_LatencyAgain]})
empty_plugin = object()


def test_plugin_types_are_valid_in_the_same_config() -> None:
    config = parse_config(
        f"plugins: ['{FAILING}:faults_plugin', '{FAILING}:invariants_plugin']\n"
        "rules:\n  - {name: r, fault: {type: explode, phase: body}}\n"
        "invariants:\n  - {type: explode, where: session}\n"
    )
    assert config.rules[0].fault_type == "explode"
    assert config.invariants[0].type == "explode"
    assert "explode" in config.catalogue.faults and "explode" in config.catalogue.invariants
    assert "explode" not in faults.REGISTRY and "explode" not in invariants.REGISTRY  # nothing process-wide


def test_without_the_plugin_its_types_are_unknown_and_valid_ones_listed() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("rules:\n  - {name: r, fault: {type: explode}}\n")
    assert "unknown fault type 'explode'" in str(info.value) and "latency" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_such_module.sub:plugin", "cannot import plugin 'no_such_module.sub:plugin': ModuleNotFoundError"),
        (f"{FAILING}:missing", "AttributeError"),
        ("not a path", "is not a 'package.module:object' path"),
        (f"{__name__}:empty_plugin", "defines none of faults, invariants, exporters, wire_formats"),
        (f"{__name__}:clashing_plugin", "duplicate fault type 'latency'"),
    ],
)
def test_a_bad_plugin_is_a_config_error_naming_its_entry(spec: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(f"seed: 1\nplugins:\n  - {FAILING}:wire_plugin\n  - '{spec}'\n", source="chaos.yaml")
    text = str(info.value)
    assert text.startswith("chaos.yaml:4: plugins[1]: "), text
    assert message in text
    assert faults.REGISTRY["latency"] is LatencyFault  # a rejected plugin changed nothing


def test_a_repeated_entry_adds_nothing_and_the_builtin_catalogue_never_changes() -> None:
    before = (dict(faults.REGISTRY), wire.BUILTIN.providers, BUILTIN.exporters)
    config = parse_config(f"plugins: ['{FAILING}:wire_plugin', '{FAILING}:wire_plugin', '{FAILING}:exporter_plugin']\n")
    assert config.catalogue.plugins == (f"{FAILING}:wire_plugin", f"{FAILING}:exporter_plugin")
    assert len(config.catalogue.exporters) == 1 and config.catalogue.wire.providers.count("garbage") == 1
    assert (dict(faults.REGISTRY), wire.BUILTIN.providers, BUILTIN.exporters) == before


def test_two_configs_in_one_process_never_see_each_others_plugins() -> None:
    with_plugin = parse_config(
        f"plugins: ['{FAILING}:faults_plugin', '{FAILING}:wire_plugin']\n"
        "rules:\n  - {name: r, match: {provider: garbage}, fault: {type: explode}}\n"
    )
    plain = parse_config("rules:\n  - {name: r, fault: {type: latency, delay_ms: 1}}\n")
    assert "explode" in with_plugin.catalogue.faults and "explode" not in plain.catalogue.faults
    assert "garbage" in with_plugin.catalogue.wire.providers and "garbage" not in plain.catalogue.wire.providers
    with pytest.raises(ConfigError, match="unknown provider 'garbage'"):
        parse_config("rules:\n  - {name: r, match: {provider: garbage}, fault: {type: latency, delay_ms: 1}}\n")
    # Each proxy's engine and detection use its own config's catalogue.
    with_engine, plain_engine = FaultEngine(with_plugin.ruleset), FaultEngine(plain.ruleset)
    assert with_engine.rules[0].fault_cls.type == "explode" and plain_engine.rules[0].fault_cls is LatencyFault
    tool = RequestInfo("GET", "h", "/tools/x", "", {"x-garbage-wire": "request"}, b"")
    assert with_plugin.catalogue.wire.detect(tool)[0].provider == "garbage"
    assert plain.catalogue.wire.detect(tool)[0].provider == "http"


def test_plugin_wire_format_comes_after_builtins_and_before_the_fallback() -> None:
    formats = parse_config(f"plugins: ['{FAILING}:wire_plugin']\n").catalogue.wire
    assert [f.provider for f in formats.formats][-2:] == ["garbage", "http"]
    req = RequestInfo("POST", "h", "/v1/chat/completions", "", {"x-garbage-wire": "request"}, b"{}")
    assert formats.detect(req)[0].provider == "openai"  # built-ins keep their requests
    tool = RequestInfo("GET", "h", "/tools/x", "", {"x-garbage-wire": "request"}, b"")
    assert formats.detect(tool) == (formats.by_provider("garbage"), "execute_tool")


def test_each_hub_makes_its_own_plugin_exporters_and_contains_them() -> None:
    factories = parse_config(f"plugins: ['{FAILING}:exporter_plugin']\n").catalogue.exporters
    guard = Guard()
    first, second = Exporters(guard=guard, extra=factories), Exporters(guard=guard, extra=factories)
    assert first.extra[0][1] is not second.extra[0][1]
    first.on_decision(type("D", (), {"rule": "r", "outcome": "fired", "to_dict": lambda self: {}})())
    first.shutdown(timeout_s=0.1)
    second.shutdown(timeout_s=0.1)
    assert guard.errors["exporter:exploding"] == 3  # on_decision, and each hub's shutdown
