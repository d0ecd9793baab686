"""The plugin mechanism (proxy/plugins.py): loading from config, registry extension, errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import pytest

from brownout import faults, invariants
from brownout.core import wire
from brownout.core.guard import Guard
from brownout.core.wire.base import RequestInfo
from brownout.exporters.hub import EXTRA_EXPORTERS, Exporters
from brownout.faults.base import FaultParams
from brownout.faults.latency import LatencyFault
from brownout.proxy import plugins
from brownout.proxy.configload import ConfigError, parse_config

FAILING = "tests.reliability.failing_plugin"


class _LatencyAgainParams(FaultParams):
    type: Literal["latency"]


class _LatencyAgain(LatencyFault):
    Params = _LatencyAgainParams


clashing_plugin = type("P", (), {"faults": [_LatencyAgain]})
empty_plugin = object()


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    yield
    for name in ("faults_plugin", "invariants_plugin", "exporter_plugin", "wire_plugin"):
        plugins.unregister(f"{FAILING}:{name}")


def test_plugin_types_are_valid_in_the_same_config() -> None:
    config = parse_config(
        f"plugins: ['{FAILING}:faults_plugin', '{FAILING}:invariants_plugin']\n"
        "rules:\n  - {name: r, fault: {type: explode, phase: body}}\n"
        "invariants:\n  - {type: explode, where: session}\n"
    )
    assert config.rules[0].fault_type == "explode"
    assert config.invariants[0].type == "explode"
    assert "explode" in faults.REGISTRY and "explode" in invariants.REGISTRY


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


def test_loading_is_idempotent_and_unregister_restores_the_registries() -> None:
    before = (dict(faults.REGISTRY), wire.FORMATS, list(EXTRA_EXPORTERS))
    for _ in range(2):
        for name in ("faults_plugin", "exporter_plugin", "wire_plugin"):
            plugins.load_plugin(f"{FAILING}:{name}")
    assert len(wire.FORMATS) == len(before[1]) + 1 and len(EXTRA_EXPORTERS) == len(before[2]) + 1
    for name in ("faults_plugin", "exporter_plugin", "wire_plugin"):
        plugins.unregister(f"{FAILING}:{name}")
    assert (dict(faults.REGISTRY), wire.FORMATS, list(EXTRA_EXPORTERS)) == before


def test_plugin_wire_format_comes_after_builtins_and_before_the_fallback() -> None:
    plugins.load_plugin(f"{FAILING}:wire_plugin")
    assert [f.provider for f in wire.FORMATS][-2:] == ["garbage", "http"]
    req = RequestInfo("POST", "h", "/v1/chat/completions", "", {"x-garbage-wire": "request"}, b"{}")
    assert wire.detect(req)[0].provider == "openai"  # built-ins keep their requests
    tool = RequestInfo("GET", "h", "/tools/x", "", {"x-garbage-wire": "request"}, b"")
    assert wire.detect(tool) == (wire.by_provider("garbage"), "execute_tool")


def test_each_hub_makes_its_own_plugin_exporters_and_contains_them() -> None:
    plugins.load_plugin(f"{FAILING}:exporter_plugin")
    guard = Guard()
    first, second = Exporters(guard=guard), Exporters(guard=guard)
    assert first.extra[0][1] is not second.extra[0][1]
    first.on_decision(type("D", (), {"rule": "r", "outcome": "fired", "to_dict": lambda self: {}})())
    first.shutdown(timeout_s=0.1)
    second.shutdown(timeout_s=0.1)
    assert guard.errors["exporter:exploding"] == 3  # on_decision, and each hub's shutdown
