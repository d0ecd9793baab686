"""Promise 3, bad config: generated and mutated configs never crash validation, errors name the
field and line, `brownout validate` exits non-zero, and a bad hot reload keeps the last good config.

Mutations start from the shipped configs (examples/ and the demo's chaos.yaml), so they reach
deep into real rule, schedule and invariant shapes rather than failing at the top level.
"""

from __future__ import annotations

import copy
import logging
import time
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from brownout import faults
from brownout.invariants import INVARIANTS
from brownout.proxy.cli import main as cli_main
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import ConfigError, parse_config

ROOT = Path(__file__).resolve().parents[2]
SEED_FILES = [ROOT / "proxy/demo/chaos.yaml", *sorted((ROOT / "examples").rglob("chaos*.yaml"))]
SEEDS = [yaml.safe_load(p.read_text()) for p in SEED_FILES]
TOP_LEVEL = set(BrownoutConfig.model_fields)

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
# what a key can become: wrong types, out-of-range numbers, nested junk
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
out_of_range = st.sampled_from([-1, -(10**9), 0, 10**12, 1e308, -0.5, 1.5, 2**63, float("nan")])


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _parent(data: Any, path: tuple[Any, ...]) -> Any:
    for seg in path[:-1]:
        data = data[seg]
    return data


@st.composite
def mutated_configs(draw: st.DrawFn) -> tuple[Any, list[tuple[Any, ...]]]:
    """A shipped config after 1-3 mutations; also the paths touched."""
    data = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    touched: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(data) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _parent(data, path), path[-1]
        op = draw(st.sampled_from(["delete", "rename", "junk", "range", "type"]))
        if op == "delete":
            del parent[key]
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(min_size=1, max_size=10)) + "_x"] = parent.pop(key)
        elif op == "range":
            parent[key] = draw(out_of_range)
        elif op == "type" and isinstance(parent.get(key) if isinstance(parent, dict) else None, dict):
            parent[key]["type"] = draw(st.text(min_size=1, max_size=10))
        else:
            parent[key] = draw(junk)
        touched.append(path)
    return data, touched


def _check_error(err: ConfigError, *, validated: bool) -> None:
    assert err.problems and str(err).strip()
    for problem in err.problems:
        assert problem.message
        assert str(problem) in str(err)
        if validated and problem.field:
            # the field path is shown and starts at a real top-level section (or the junk key itself)
            assert problem.field in str(err)
            assert problem.line is not None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_mutated_configs_fail_only_with_config_error_naming_the_field(case: tuple[Any, list[Any]]) -> None:
    data, _touched = case
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    try:
        parse_config(text, source="chaos.yaml")
    except ConfigError as e:
        _check_error(e, validated=True)
        seen = yaml.safe_load(text)  # the document as brownout read it (YAML may fold odd keys)
        if isinstance(seen, dict) and e.problems[0].field:
            # every problem points into the document: a section the model knows or a key the user wrote
            keys = TOP_LEVEL | {str(k) for k in seen}
            for problem in e.problems:
                assert any(problem.field == k or problem.field.startswith((k + ".", k + "[")) for k in keys), problem


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.text(max_size=200),
        st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
        junk.map(lambda v: yaml.safe_dump(v)),
    )
)
def test_random_yaml_never_crashes_validation(text: str) -> None:
    try:
        parse_config(text, source="chaos.yaml")
    except ConfigError as e:
        _check_error(e, validated=False)


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=20).filter(lambda s: s not in faults.REGISTRY), st.sampled_from(SEEDS))
def test_unknown_fault_type_lists_the_valid_ones(bad: str, seed: Any) -> None:
    data = copy.deepcopy(seed)
    data["rules"][0]["fault"]["type"] = bad
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_dump(data), source="chaos.yaml")
    assert "rules[0].fault" in str(err.value)
    assert all(name in str(err.value) for name in faults.REGISTRY)


@settings(max_examples=50, deadline=None)
@given(st.text(min_size=1, max_size=20))
def test_unknown_invariant_type_lists_the_valid_ones(bad: str) -> None:
    valid = [get_args(cls.Config.model_fields["type"].annotation)[0] for cls in INVARIANTS]
    if bad in valid:
        return
    data = copy.deepcopy(SEEDS[0])
    data["invariants"][1]["type"] = bad
    with pytest.raises(ConfigError) as err:
        parse_config(yaml.safe_dump(data), source="chaos.yaml")
    assert "invariants[1]" in str(err.value)
    assert all(name in str(err.value) for name in valid), str(err.value)


BAD_FILES = {
    "rules:\n  - name: slow\n    fault: {type: latency, delay_ms: -5}\n": ("rules[0].fault.delay_ms", ":3:"),
    "seed: 1\nrules:\n  - name: x\n    fault: {type: explode}\n": ("explode", "latency"),
    "invariants:\n  - {type: no_pii, direction: sideways}\n": ("invariants[0]", ":2:"),
    "proxy:\n  capture_max_bytes: lots\n": ("proxy.capture_max_bytes", ":2:"),
    "rules: [\n": ("YAML syntax error", "chaos.yaml"),
}


@pytest.mark.parametrize("text", list(BAD_FILES))
def test_brownout_validate_exits_non_zero_naming_the_field(tmp_path: Path, text: str) -> None:
    path = tmp_path / "chaos.yaml"
    path.write_text(text)
    result = CliRunner().invoke(cli_main, ["validate", str(path)])
    assert result.exit_code == 1
    for needle in BAD_FILES[text]:
        assert needle in result.output, result.output


def test_brownout_validate_accepts_every_shipped_config() -> None:
    for path in SEED_FILES:
        result = CliRunner().invoke(cli_main, ["validate", str(path)])
        assert result.exit_code == 0, result.output


GOOD = """\
version: 1
rules:
  - name: tool-down
    match: {path: "/tools/*"}
    fault: {type: http_error, status: STATUS}
control: {token: fuzz-token}
"""


def _weather_status(proxy: Any, upstream: Any) -> int:
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=5) as client:
        return client.get(f"{upstream.url}/tools/weather?city=Paris").status_code


@st.composite
def bad_reloads(draw: st.DrawFn) -> str:
    """A mutated config that does not validate (the reload must reject it)."""
    data, _ = draw(mutated_configs())
    text = yaml.safe_dump(data, sort_keys=False)
    try:
        parse_config(text)
    except ConfigError:
        return text
    return text + "\nnot_a_section: 1\n"  # it happened to stay valid: break it for sure


def test_bad_hot_reload_keeps_the_last_good_config(
    upstream: Any, brownout_proxy: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(GOOD.replace("STATUS", "503"))
    proxy = brownout_proxy(path, upstream=upstream)
    control = f"http://127.0.0.1:{proxy.addon.control.port}"
    auth = {"Authorization": "Bearer fuzz-token"}
    assert _weather_status(proxy, upstream) == 503

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
    @given(bad_reloads())
    def reload_rejected(text: str) -> None:
        path.write_text(text)
        resp = httpx.post(f"{control}/reload", headers=auth, timeout=10)
        assert resp.status_code == 422 and "keeping the last good config" in resp.json()["message"]
        assert _weather_status(proxy, upstream) == 503  # the old rule still acts

    reload_rejected()

    # The file watcher path: a bad file is logged and rejected, then a good one is picked up.
    caplog.set_level(logging.ERROR, logger="brownout.proxy.addon")
    time.sleep(1.1)  # let the watcher see (and reject) the last generated file first
    caplog.clear()
    path.write_text("rules:\n  - name: tool-down\n    fault: {type: http_error, status: 7}\n")
    _wait(lambda: "config reload rejected" in caplog.text)
    assert "live.yaml:3: rules[0].fault.status" in caplog.text
    assert _weather_status(proxy, upstream) == 503
    path.write_text(GOOD.replace("STATUS", "502"))
    _wait(lambda: _weather_status(proxy, upstream) == 502)


def _wait(cond: Any, timeout_s: float = 6.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def _reloads(proxy: Any) -> dict[str, float]:
    """brownout_config_reloads_total by outcome, scraped from the proxy's /metrics."""
    text = httpx.get(f"http://127.0.0.1:{proxy.addon.pipeline.exporters.metrics_port}/metrics", timeout=5).text
    return {
        sample.labels["outcome"]: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "brownout_config_reloads_total"
    }


def test_reloads_are_counted_by_outcome(upstream: Any, brownout_proxy: Any, tmp_path: Path) -> None:
    """A rejected reload is visible where operators look (a metric, and an alert on it), not only in the log."""
    path = tmp_path / "live.yaml"
    path.write_text(GOOD.replace("STATUS", "503"))
    proxy = brownout_proxy(path, upstream=upstream, extra_options={"brownout_reload_s": 0})
    control = f"http://127.0.0.1:{proxy.addon.control.port}"
    auth = {"Authorization": "Bearer fuzz-token"}
    assert _reloads(proxy) == {}
    path.write_text(GOOD.replace("STATUS", "7"))
    for _ in range(2):
        assert httpx.post(f"{control}/reload", headers=auth, timeout=10).status_code == 422
    assert _reloads(proxy) == {"rejected": 2.0}
    path.write_text(GOOD.replace("STATUS", "502"))
    assert httpx.post(f"{control}/reload", headers=auth, timeout=10).status_code == 200
    assert _reloads(proxy) == {"rejected": 2.0, "applied": 1.0}
    assert _weather_status(proxy, upstream) == 502
