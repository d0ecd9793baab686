"""brownout's configuration: one YAML file, validated once at load by pydantic.

Sections are owned by their packages (rules by faults/, invariants by invariants/,
exporters by exporters/); this module assembles them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from brownout.exporters.config import ControlConfig, ExportersConfig
from brownout.faults.config import Rules
from brownout.invariants.config import InvariantList

__all__ = ["BrownoutConfig", "Model", "ProxySettings", "with_listen_overrides"]


class Model(BaseModel):
    """Base for every config model: unknown fields are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ProxySettings(Model):
    """How the proxy itself handles traffic."""

    stream_large_bodies: str = Field(
        "1m",
        description="Responses larger than this (or of unknown size) stream through instead of buffering; "
        "a bounded copy (capture_max_bytes) is kept for parsing (k/m/g suffixes).",
    )
    buffer_max_bytes: str = Field(
        "32m",
        description="Hard cap on what is ever held in memory per body, requests included: a larger request "
        "streams to upstream unrecognised (no request-phase faults), a larger response streams (k/m/g suffixes).",
    )

    @field_validator("stream_large_bodies", "buffer_max_bytes")
    @classmethod
    def _size(cls, value: str) -> str:
        from mitmproxy.utils import human

        try:
            human.parse_size(value)
        except ValueError as e:
            raise ValueError(f"a size like 512k, 1m or 2g, got {value!r}") from e
        return value

    capture_max_bytes: int = Field(
        1_048_576, ge=0, description="Request/response text kept per exchange for spans and invariants."
    )
    capture_content: bool = Field(False, description="Put message content on spans (off: no prompts leave brownout).")
    announce_faults: bool = Field(False, description="Add an `x-brownout-fault` header to responses a fault touched.")
    session_idle_s: float = Field(300.0, gt=0, description="A session with no traffic for this long is closed.")
    upstream_error: Literal["drop", "502"] = Field(
        "drop",
        description="When upstream gives no response (refused, DNS or TLS failure, closed early): 'drop' fails "
        "the client's connection as a direct connection would fail (HTTP/2: its stream); '502' answers "
        "mitmproxy's own 502 page instead.",
    )
    ignore_hosts: list[str] = Field(
        default_factory=list,
        description="Globs over host names (e.g. 'raw.githubusercontent.com', '*.internal') whose traffic passes "
        "through untouched: no faults, sessions, spans, invariants, logs or experiment records; only counted in "
        "brownout_ignored_requests_total.",
    )

    @field_validator("ignore_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for glob in value:
            # A port or a URL would never match: hosts are compared without them (IPv6 has several colons).
            if not glob.strip() or "/" in glob or " " in glob or glob.count(":") == 1:
                raise ValueError(f"a host name glob such as 'api.example.com' or '*.example.com', got {glob!r}")
        return value

    @field_validator("upstream_error", mode="before")
    @classmethod
    def _status_as_text(cls, value: Any) -> Any:
        return str(value) if value == 502 else value  # YAML reads an unquoted 502 as a number


class BrownoutConfig(Model):
    """The whole config file."""

    version: Literal[1] = 1
    plugins: list[str] = Field(
        default_factory=list,
        description="'package.module:object' plugins adding fault and invariant types, exporters, wire formats.",
    )
    seed: int = Field(0, description="Seed for every fault decision: same seed, same faults.")
    proxy: ProxySettings = ProxySettings()
    rules: Rules = Field(default_factory=list)
    invariants: InvariantList = Field(default_factory=list)
    exporters: ExportersConfig = ExportersConfig()
    control: ControlConfig = ControlConfig()

    @model_validator(mode="before")
    @classmethod
    def _load_plugins_first(cls, data: Any) -> Any:
        # Before any field is validated: rules and invariants may use the plugins' types.
        if isinstance(data, dict) and "plugins" in data:
            from brownout.proxy.plugins import load_plugins  # lazy: it imports every registry

            load_plugins(data["plugins"])
        return data


def with_listen_overrides(config: BrownoutConfig, metrics_listen: str = "", control_listen: str = "") -> BrownoutConfig:
    """The config with /metrics and control API addresses replaced (from --set options), when given."""
    update: dict[str, Any] = {}
    if metrics_listen:
        prom = config.exporters.prometheus.model_copy(update={"listen": metrics_listen})
        update["exporters"] = config.exporters.model_copy(update={"prometheus": prom})
    if control_listen:
        update["control"] = config.control.model_copy(update={"listen": control_listen})
    return config.model_copy(update=update) if update else config
