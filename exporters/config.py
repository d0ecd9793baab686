"""Config models for the `exporters:` section, and OTEL_* environment resolution."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator

from brownout.core.config import ConfigPath, Model, parse_listen
from brownout.core.semconv import SemconvKey

__all__ = [
    "DEFAULT_MODEL_ALLOWLIST",
    "ExportersConfig",
    "JsonlConfig",
    "ListenConfig",
    "OtlpConfig",
    "OtlpSettings",
    "PrometheusConfig",
]

# Globs for the model names people actually call; anything else is labelled "other" so a
# client sending random model strings cannot blow up Prometheus's series count.
DEFAULT_MODEL_ALLOWLIST: tuple[str, ...] = (
    "gpt-*",
    "chatgpt-*",
    "o1*",
    "o3*",
    "o4*",
    "text-embedding-*",
    "claude-*",
    "gemini-*",
    "llama*",
    "mistral*",
    "mixtral*",
    "codestral*",
    "qwen*",
    "deepseek*",
    "phi*",
    "gemma*",
    "mock-*",
)


class ListenConfig(Model):
    """A section with a `listen: host:port` address, checked at load."""

    listen: str

    @field_validator("listen")
    @classmethod
    def _check_listen(cls, v: str) -> str:
        parse_listen(v)
        return v


class PrometheusConfig(ListenConfig):
    """`/metrics` for Prometheus."""

    enabled: bool = True
    listen: str = Field("127.0.0.1:9464", description="host:port of the /metrics server (port 0 picks one).")
    model_allowlist: tuple[str, ...] = Field(DEFAULT_MODEL_ALLOWLIST, description="fnmatch globs; others -> 'other'.")
    max_models: int = Field(200, ge=1, description="Distinct model label values kept; later ones -> 'other'.")


class OtlpConfig(Model):
    """OTLP trace export; unset fields fall back to the standard OTEL_* variables."""

    enabled: bool | None = Field(None, description="None: on when an endpoint is set here or in OTEL_* env.")
    endpoint: str | None = Field(None, description="Base URL (http://host:4318) or full /v1/traces URL.")
    protocol: Literal["http/protobuf", "grpc"] | None = None
    headers: dict[str, str] | None = None
    timeout_s: float = Field(2.0, gt=0, le=60, description="Per export request; small so shutdown stays bounded.")
    max_queue_size: int = Field(2048, ge=1, description="Spans buffered while the collector is slow; more are dropped.")
    max_export_batch_size: int = Field(512, ge=1)
    schedule_delay_ms: int = Field(1000, ge=1)
    service_name: str | None = Field(None, description="Default OTEL_SERVICE_NAME, else 'brownout'.")

    def resolve(self, environ: Mapping[str, str] | None = None) -> OtlpSettings | None:
        """Concrete exporter settings, or None when OTLP export is off."""
        env = os.environ if environ is None else environ
        traces_env = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
        base_env = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        protocol = (
            self.protocol
            or (
                env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf"
            ).strip()
        )
        if protocol not in ("http/protobuf", "grpc"):
            raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL: unsupported protocol {protocol!r} (http/protobuf, grpc)")
        if self.endpoint:
            endpoint, full = self.endpoint, False
        elif traces_env:
            endpoint, full = traces_env, True  # the spec: a signal endpoint is used as is
        elif base_env:
            endpoint, full = base_env, False
        else:
            endpoint, full = ("http://127.0.0.1:4317" if protocol == "grpc" else "http://127.0.0.1:4318"), False
        if self.enabled is False or (self.enabled is None and not (self.endpoint or traces_env or base_env)):
            return None
        if protocol == "http/protobuf" and not full and urlsplit(endpoint).path.rstrip("/") in ("",):
            endpoint = endpoint.rstrip("/") + "/v1/traces"
        headers = (
            dict(self.headers)
            if self.headers is not None
            else _parse_headers(
                env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
            )
        )
        return OtlpSettings(
            endpoint=endpoint,
            protocol=protocol,  # type: ignore[arg-type]
            headers=headers,
            timeout_s=self.timeout_s,
            max_queue_size=self.max_queue_size,
            max_export_batch_size=min(self.max_export_batch_size, self.max_queue_size),
            schedule_delay_ms=self.schedule_delay_ms,
            service_name=self.service_name,
        )


@dataclass(frozen=True, slots=True)
class OtlpSettings:
    """OTLP settings after config and environment are merged."""

    endpoint: str
    protocol: Literal["http/protobuf", "grpc"]
    headers: dict[str, str]
    timeout_s: float
    max_queue_size: int
    max_export_batch_size: int
    schedule_delay_ms: int
    service_name: str | None


def _parse_headers(raw: str) -> dict[str, str]:
    # W3C baggage-like "k1=v1,k2=v2" with percent-encoded values, as the OTLP exporter spec says.
    out: dict[str, str] = {}
    for part in raw.split(","):
        key, sep, value = part.partition("=")
        if sep and key.strip():
            out[unquote(key.strip()).lower()] = unquote(value.strip())
    return out


class JsonlConfig(Model):
    """Append-only JSONL logs; each is off when its path is unset."""

    path: ConfigPath | None = Field(None, description="Violation log, one record per line.")
    decisions_path: ConfigPath | None = Field(None, description="Fault decision log.")
    exchanges_path: ConfigPath | None = Field(None, description="Per-exchange summaries (no content, no secrets).")
    fsync: bool = Field(False, description="fsync after each batch of lines: survives power loss, costs a disk sync.")
    max_queue_size: int = Field(
        10_000, ge=1, description="Lines waiting for a log's writer thread; more are dropped and counted."
    )


class ExportersConfig(Model):
    """The `exporters:` section."""

    prometheus: PrometheusConfig = PrometheusConfig()
    otlp: OtlpConfig = OtlpConfig()
    jsonl: JsonlConfig = JsonlConfig()
    recent_violations: int = Field(1000, ge=0, description="Violations kept in memory for GET /violations.")
    recent_exchanges: int = Field(
        1000, ge=0, description="Exchange summaries kept in memory for GET /exchanges (brownout discover)."
    )
    semconv: SemconvKey = Field(
        "pinned",
        description="GenAI semantic conventions on spans and /metrics: pinned (v1.41.0) or latest; "
        "OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental selects latest whatever this says.",
    )
