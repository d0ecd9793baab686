"""exporters: / control: config models and OTEL_* environment resolution."""

from __future__ import annotations

import pydantic
import pytest

from brownout.exporters.config import ExportersConfig, OtlpConfig, PrometheusConfig
from brownout.proxy.config import BrownoutConfig, ControlConfig


def test_defaults_and_issue_example() -> None:
    cfg = BrownoutConfig.model_validate(
        {
            "exporters": {
                "prometheus": {"listen": "127.0.0.1:9464"},
                "otlp": {"endpoint": "http://127.0.0.1:4318", "protocol": "http/protobuf", "headers": {}},
                "jsonl": {"path": "brownout-violations.jsonl", "decisions_path": "brownout-decisions.jsonl"},
            },
            "control": {"listen": "127.0.0.1:9465", "token_env": "BROWNOUT_TOKEN"},
        }
    )
    assert cfg.exporters.prometheus.listen == "127.0.0.1:9464"
    assert cfg.control.listen == "127.0.0.1:9465"
    assert BrownoutConfig().control.listen == "127.0.0.1:9465"
    assert ExportersConfig().prometheus.enabled and ExportersConfig().jsonl.path is None


def test_models_forbid_unknown_fields_and_are_frozen() -> None:
    with pytest.raises(pydantic.ValidationError, match="lisen"):
        PrometheusConfig.model_validate({"lisen": "x"})
    with pytest.raises(pydantic.ValidationError, match="listen"):
        ControlConfig(listen="9465")
    with pytest.raises(pydantic.ValidationError):
        OtlpConfig(protocol="http/json")  # type: ignore[arg-type]
    with pytest.raises(pydantic.ValidationError):
        ExportersConfig().prometheus.listen = "0.0.0.0:1"  # type: ignore[misc]


def test_otlp_off_unless_an_endpoint_is_configured() -> None:
    assert OtlpConfig().resolve({}) is None
    assert OtlpConfig(enabled=False, endpoint="http://c:4318").resolve({}) is None
    on = OtlpConfig(enabled=True).resolve({})
    assert on is not None and on.endpoint == "http://127.0.0.1:4318/v1/traces"


def test_otlp_config_endpoint_gets_signal_path() -> None:
    s = OtlpConfig(endpoint="http://collector:4318", headers={"x-a": "1"}).resolve({})
    assert s is not None
    assert (s.endpoint, s.protocol, s.headers) == ("http://collector:4318/v1/traces", "http/protobuf", {"x-a": "1"})
    full = OtlpConfig(endpoint="http://c:4318/custom/traces").resolve({})
    assert full is not None and full.endpoint == "http://c:4318/custom/traces"


def test_otel_environment_variables() -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://base:4318/",
        "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20abc,x-tenant=t1",
    }
    s = OtlpConfig().resolve(env)
    assert s is not None
    assert s.endpoint == "http://base:4318/v1/traces"
    assert s.headers == {"authorization": "Bearer abc", "x-tenant": "t1"}
    # The traces endpoint wins and is used as is; the protocol variable switches to grpc.
    env |= {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://traces:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}
    s = OtlpConfig().resolve(env)
    assert s is not None and (s.endpoint, s.protocol) == ("http://traces:4317", "grpc")
    # The config file wins over the environment.
    s = OtlpConfig(endpoint="http://file:4318", protocol="http/protobuf", headers={}).resolve(env)
    assert s is not None and (s.endpoint, s.protocol, s.headers) == ("http://file:4318/v1/traces", "http/protobuf", {})
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL"):
        OtlpConfig().resolve({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_control_token_from_config_or_env() -> None:
    assert ControlConfig().resolve_token({}) is None
    assert ControlConfig().resolve_token({"BROWNOUT_TOKEN": "t"}) == "t"
    assert ControlConfig(token_env="MY_TOKEN").resolve_token({"MY_TOKEN": "m", "BROWNOUT_TOKEN": "t"}) == "m"
    assert ControlConfig(token="c").resolve_token({"BROWNOUT_TOKEN": "t"}) == "c"
