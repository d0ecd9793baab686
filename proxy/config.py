"""brownout's configuration: one YAML file, validated once at load by pydantic.

Sections are owned by their packages (rules by faults/, invariants by invariants/, exporters
by exporters/); this module assembles them, with the proxy's own sections (`proxy:`,
`control:`). A config is validated against its own catalogue (built-ins plus its `plugins:`),
which it then carries (`config.catalogue`) for the engine, the invariants and the exporters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from typing import Any, Literal

from mitmproxy.utils import human
from pydantic import (
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from brownout.core.config import Model
from brownout.core.state import StateConfig
from brownout.exporters.config import ExportersConfig, ListenConfig
from brownout.faults.config import Rules
from brownout.faults.engine import RuleSet
from brownout.invariants.config import InvariantList
from brownout.proxy.agent_config import AgentSpansConfig
from brownout.proxy.plugins import BUILTIN, Catalogue, catalogue_for
from brownout.proxy.record.config import RecordConfig, ReplayConfig

__all__ = ["BrownoutConfig", "ControlConfig", "ProxySettings", "with_listen_overrides"]

_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


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
        "streams to upstream unrecognised (no request-phase faults), a larger response streams. Also the most "
        "a compressed body is decoded for parsing and faults: past it the body passes through untouched and "
        "uninspected (k/m/g suffixes).",
    )

    @field_validator("stream_large_bodies", "buffer_max_bytes")
    @classmethod
    def _size(cls, value: str) -> str:
        try:
            human.parse_size(value)
        except ValueError as e:
            raise ValueError(f"a size like 512k, 1m or 2g, got {value!r}") from e
        return value

    capture_max_bytes: int = Field(
        1_048_576, ge=0, description="Text kept per exchange field (request body, messages, tool arguments, output)."
    )
    event_max_bytes: int = Field(
        4 * 1024 * 1024,
        ge=1024,
        description="Longest SSE event or NDJSON line parsed: a stream with no event boundary for this many "
        "bytes stops being parsed (and edited) and passes through untouched.",
    )
    capture_content: bool = Field(
        False,
        description="Put message content on spans (off: no prompts leave brownout); API keys of known formats "
        "and credential fields in it are still blanked.",
    )
    secret_headers: list[str] = Field(
        default_factory=list,
        description="More header names whose values are credentials (any case), never kept in the exchange, "
        "logs or cassettes; besides the built-in list and any name with a word ending in key, token, secret, "
        "auth, password, credential(s), signature or cookie.",
    )
    announce_faults: bool = Field(False, description="Add an `x-brownout-fault` header to responses a fault touched.")
    session_idle_s: float = Field(300.0, gt=0, description="A session with no traffic for this long is closed.")
    analysis: Literal["inline", "process"] = Field(
        "inline",
        description="Where each finished exchange's span, invariants and OTLP export run: 'inline' on the proxy's "
        "event loop, or 'process' in a second Python process, on another CPU core, so the proxy's loop is left to "
        "traffic. Violations reach /metrics, logs and the control API a few to tens of milliseconds later. Not with "
        "state.backend redis or agent_spans.",
    )
    analysis_max_queued: int = Field(
        10_000,
        ge=1,
        description="With analysis 'process': finished exchanges waiting for the analysis process; one more is "
        "counted and logged but not judged, and counted in brownout_invariant_checks_dropped_total.",
    )
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
        "brownout_ignored_requests_total. An unreachable one fails as any other host does (upstream_error).",
    )

    request_header_timeout_s: float = Field(
        30.0,
        ge=0,
        description="A new client connection, or a CONNECT tunnel, must deliver its first request's headers within "
        "this time, or it is closed (slowloris); 0: no bound.",
    )
    client_idle_timeout_s: float = Field(
        75.0,
        ge=0,
        description="A client connection with no request in flight is closed when the next request's headers have "
        "not arrived after this long (idle keep-alive); never while a request or stream is in flight; 0: no bound.",
    )
    max_client_connections: int = Field(
        4096,
        ge=1,
        description="Client connections served at once; a request on one more is answered 503 (JSON body, "
        "retry-after, x-brownout-error: max_client_connections) and its connection closed.",
    )
    admit_per_tick: int = Field(
        8,
        ge=0,
        description="New client connections started per event-loop iteration; more wait, in arrival order, for "
        "the next iterations, so a burst of connections cannot make the streams already in flight late "
        "(brownout_client_connection_wait_seconds shows the wait); 0: every connection starts at once.",
    )
    drain_timeout_s: float = Field(
        20.0,
        ge=0,
        description="On SIGTERM/SIGINT, how long in-flight exchanges may finish before they are cut (recorded with "
        "error.type 'shutdown'); a second signal cuts at once. Below Kubernetes' default 30 s grace period.",
    )

    @field_validator("ignore_hosts")
    @classmethod
    def _hosts(cls, value: list[str]) -> list[str]:
        for glob in value:
            # A port or a URL would never match: hosts are compared without them (IPv6 has several colons).
            if not glob.strip() or "/" in glob or " " in glob or glob.count(":") == 1:
                raise ValueError(f"a host name glob such as 'api.example.com' or '*.example.com', got {glob!r}")
        return value

    @field_validator("secret_headers")
    @classmethod
    def _header_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"a header name such as 'x-tenant-secret', got {name!r}")
        return [name.lower() for name in value]

    @field_validator("upstream_error", mode="before")
    @classmethod
    def _status_as_text(cls, value: Any) -> Any:
        return str(value) if value == 502 else value  # YAML reads an unquoted 502 as a number


# The validation context of the model_validate call under way in this thread or task, if any.
_CALLER_CONTEXT: ContextVar[Mapping[str, Any] | None] = ContextVar("brownout_config_context", default=None)


class ControlConfig(ListenConfig):
    """The `control:` section: the runtime control API."""

    enabled: bool = True
    listen: str = Field("127.0.0.1:9465", description="Loopback by default: the API can pause chaos.")
    token: str | None = Field(None, description="Bearer token; prefer token_env so it stays out of files.")
    token_env: str = Field("BROWNOUT_TOKEN", description="Environment variable holding the token.")

    def resolve_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The configured token, else the one in `token_env`; None means only /healthz answers."""
        env = os.environ if environ is None else environ
        return self.token or env.get(self.token_env) or None


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
    record: RecordConfig = RecordConfig()
    replay: ReplayConfig = ReplayConfig()
    state: StateConfig = StateConfig()
    agent_spans: AgentSpansConfig | None = None

    _catalogue: Catalogue = PrivateAttr(default_factory=lambda: BUILTIN)

    def __init__(self, /, **data: Any) -> None:
        # Keyword construction validates with the catalogue of its own plugins, like model_validate.
        # Inside model_validate pydantic calls this __init__ too: the caller's context (the config
        # file's directory) comes along through _CALLER_CONTEXT, which __init__'s signature cannot carry.
        context = {**(_CALLER_CONTEXT.get() or {}), **catalogue_for(data.get("plugins")).validation_context()}
        self.__pydantic_validator__.validate_python(data, self_instance=self, context=context)

    @model_validator(mode="wrap")
    @classmethod
    def _with_catalogue(cls, data: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        # Plugins first: rules and invariants may use the types they add. The catalogue travels
        # in the validation context to every section, then stays with the config.
        if isinstance(data, dict) and (bad := [key for key in data if not isinstance(key, str)]):
            # pydantic hands a model with its own __init__ the mapping as keywords, which must be
            # strings: a YAML null key (`?`) or number key is reported as a bad key instead of a TypeError
            errors = [
                {"type": "invalid_key", "loc": (key if type(key) is int else str(key),), "input": key} for key in bad
            ]
            raise ValidationError.from_exception_data(cls.__name__, errors)  # type: ignore[arg-type]
        context = info.context if isinstance(info.context, Mapping) else None
        if isinstance(data, dict) and (context is None or "catalogue" not in context):
            # The caller's context (the config file's directory) travels on with the catalogue's.
            catalogue = catalogue_for(data.get("plugins")).validation_context()
            return cls.model_validate(data, context={**(context or {}), **catalogue})
        token = _CALLER_CONTEXT.set(context)
        try:
            config = handler(data)
        finally:
            _CALLER_CONTEXT.reset(token)
        if context is not None and isinstance(config, BrownoutConfig):
            config._catalogue = context["catalogue"]
        return config

    @model_validator(mode="after")
    def _analysis_alone(self) -> BrownoutConfig:
        # The fleet's shared sessions and the join of the agent's spans live on the proxy's loop.
        if self.proxy.analysis == "process":
            if self.state.backend == "redis":
                raise ValueError("proxy.analysis 'process' cannot be used with state.backend 'redis'")
            if self.agent_spans is not None:
                raise ValueError("proxy.analysis 'process' cannot be used with agent_spans")
        return self

    @property
    def catalogue(self) -> Catalogue:
        """The fault and invariant types, exporter factories and wire formats this config knows."""
        return self._catalogue

    @property
    def ruleset(self) -> RuleSet:
        """What the fault engine runs."""
        return RuleSet(
            rules=self.rules,
            seed=self.seed,
            session_ttl_s=self.proxy.session_idle_s,
            fault_types=self._catalogue.faults,
            llm_providers=self._catalogue.wire.llm_providers,
        )


def with_listen_overrides(config: BrownoutConfig, metrics_listen: str = "", control_listen: str = "") -> BrownoutConfig:
    """The config with /metrics and control API addresses replaced (from --set options), when given."""
    update: dict[str, Any] = {}
    if metrics_listen:
        prom = config.exporters.prometheus.model_copy(update={"listen": metrics_listen})
        update["exporters"] = config.exporters.model_copy(update={"prometheus": prom})
    if control_listen:
        update["control"] = config.control.model_copy(update={"listen": control_listen})
    return config.model_copy(update=update) if update else config
