"""Rule configuration: match + fault + schedule, validated once at load.

The `fault` field dispatches on `type` through the fault types of the config being validated:
the built-ins, plus its plugins' when the validation context carries them (`fault_types`; see
`brownout.core.config.context_value`). An unknown or missing `type` is an error that lists the
valid types; a known type is validated by that fault's `Params` model, so errors carry the
nested field path (`rules.0.fault.delay_ms`). `match.provider` likewise names one of the
config's wire formats (`providers`).

A rule may omit `fault` only when its schedule has a `quota`: it then answers the
provider's own 429 (with `retry-after` set to the seconds left in the quota minute) once
the quota is exceeded. With both, the given fault is injected instead of that 429.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    Field,
    SerializeAsAny,
    ValidationInfo,
    field_validator,
    model_validator,
)

from brownout.core import wire
from brownout.core.config import Model, check_type, context_value
from brownout.core.wire.mcp_eras import METHOD_ERAS
from brownout.faults import REGISTRY
from brownout.faults.base import Fault, FaultParams

__all__ = [
    "MatchConfig",
    "QuotaConfig",
    "RuleConfig",
    "Rules",
    "ScheduleConfig",
    "fault_types",
    "unique_rule_names",
]


def fault_types(info: ValidationInfo) -> Mapping[str, type[Fault]]:
    """The fault types the config being validated knows (built-ins unless its context says more)."""
    types: Mapping[str, type[Fault]] = context_value(info, "fault_types", REGISTRY)
    return types


class MatchConfig(Model):
    """Which exchanges a rule applies to; every given field must match (globs are fnmatch)."""

    host: str | None = Field(None, description="Glob over the upstream host (case-insensitive).")
    path: str | None = Field(None, description="Glob over the request path, query string excluded.")
    method: str | None = Field(None, description="HTTP method, exact (case-insensitive).")
    provider: str | None = Field(
        None,
        description="A wire format: openai, anthropic, gemini, ollama, bedrock, mcp, http (everything else), or a plugin's.",
        json_schema_extra={"examples": list(wire.BUILTIN.providers)},
    )
    operation: str | None = Field(None, description="Operation, exact: chat, responses, embeddings, tools/call, ...")
    model: str | None = Field(None, description="Glob over the requested model.")
    tool: str | None = Field(
        None,
        description="Glob over tool names: the request is a tools/call of it, or the response calls it.",
    )
    stream: bool | None = Field(None, description="The client asked for a streamed response.")
    header: dict[str, str] = Field(default_factory=dict, description="Request header name -> glob over its value.")
    session: str | None = Field(None, description="Glob over the session id.")
    mcp_method: str | None = Field(None, description="Glob over the MCP JSON-RPC method (tools/call, ...).")
    event: str | None = Field(
        None,
        description="Realtime WebSocket sessions: glob over the event type (response.done, toolCall, ...); "
        "the rule then acts on each matching event instead of the upgrade request.",
    )
    direction: Literal["server", "client"] | None = Field(
        None, description="Realtime WebSocket sessions: only events the server (or the client) sends."
    )
    mcp_era: Literal["handshake", "modern"] | None = Field(
        None,
        description="The MCP era the request speaks: handshake (initialize and sessions, up to 2025-11-25) or "
        "modern (the 2026-07-28 per-request envelope).",
    )

    @property
    def on_events(self) -> bool:
        """The rule acts on the events of realtime sessions, not on requests."""
        return self.event is not None or self.direction is not None

    @field_validator("provider")
    @classmethod
    def _known_provider(cls, v: str | None, info: ValidationInfo) -> str | None:
        known = context_value(info, "providers", wire.BUILTIN.providers)
        if v is not None and v not in known:
            raise ValueError(f"unknown provider {v!r}; known: {', '.join(known)}")
        return v

    @field_validator("header")
    @classmethod
    def _lower_names(cls, v: dict[str, str]) -> dict[str, str]:
        # Exchange headers are stored with lower-case names.
        return {k.lower(): g for k, g in v.items()}


class QuotaConfig(Model):
    """A per-minute quota; once exceeded the rule answers 429 until the minute ends."""

    requests_per_min: int | None = Field(None, ge=1)
    tokens_per_min: int | None = Field(None, ge=1, description="Input + output tokens reported by the provider.")

    @model_validator(mode="after")
    def _one_limit(self) -> QuotaConfig:
        if self.requests_per_min is None and self.tokens_per_min is None:
            raise ValueError("quota needs requests_per_min and/or tokens_per_min")
        return self


class ScheduleConfig(Model):
    """When a matching exchange gets the fault; the defaults fire on every match."""

    probability: float = Field(1.0, ge=0.0, le=1.0)
    after: int = Field(0, ge=0, description="Skip the first N matches.")
    first: int | None = Field(None, ge=1, description="Only the first N matches (counted after `after`).")
    every: int | None = Field(None, ge=1, description="Every Nth match (counted after `after`).")
    max_injections: int | None = Field(None, ge=0, description="Cap on injections in the scope.")
    max_concurrent: int | None = Field(None, ge=1, description="Cap on injected exchanges in flight in the scope.")
    start_s: float | None = Field(None, ge=0, description="Window start, seconds after proxy start.")
    duration_s: float | None = Field(None, gt=0, description="Window length from its start (absent: forever).")
    starts_at: AwareDatetime | None = Field(None, description="Absolute window start (ISO 8601 with timezone).")
    period_s: float | None = Field(None, gt=0, description="Recurring outage: cycle length ...")
    active_s: float | None = Field(None, gt=0, description="... of which the first active_s are active.")
    ramp_s: float | None = Field(None, gt=0, description="Probability rises linearly from 0 over this many seconds.")
    quota: QuotaConfig | None = None
    scope: Literal["global", "session"] = Field("global", description="Counters per rule, or per rule and session.")

    @model_validator(mode="after")
    def _consistent(self) -> ScheduleConfig:
        if self.start_s is not None and self.starts_at is not None:
            raise ValueError("give start_s (relative) or starts_at (absolute), not both")
        if (self.period_s is None) != (self.active_s is None):
            raise ValueError("period_s and active_s go together")
        if self.period_s is not None and self.active_s is not None and self.active_s > self.period_s:
            raise ValueError(f"active_s ({self.active_s}) must be <= period_s ({self.period_s})")
        return self

    @property
    def starts_at_ts(self) -> float | None:
        return None if self.starts_at is None else datetime.timestamp(self.starts_at)


def _validate_fault(value: Any, info: ValidationInfo) -> FaultParams | None:
    if value is None or isinstance(value, FaultParams):
        return value
    registry = fault_types(info)
    check_type(value, registry, "fault")
    cls = registry[value["type"]]
    # A nested ValidationError keeps its field locations under `fault`.
    params: FaultParams = cls.Params.model_validate(dict(value), context=info.context)
    return params


class RuleConfig(Model):
    """One chaos rule: which exchanges (match), what happens (fault), and when (schedule)."""

    name: str = Field(min_length=1)
    enabled: bool = True
    match: MatchConfig = MatchConfig()
    # SerializeAsAny: dump the concrete Params subclass, not just the base fields.
    fault: SerializeAsAny[FaultParams] | None = None
    schedule: ScheduleConfig = ScheduleConfig()

    @field_validator("fault", mode="before")
    @classmethod
    def _fault(cls, value: Any, info: ValidationInfo) -> FaultParams | None:
        return _validate_fault(value, info)

    @model_validator(mode="after")
    def _fault_or_quota(self, info: ValidationInfo) -> RuleConfig:
        if self.fault is None and self.schedule.quota is None:
            valid = ", ".join(sorted(fault_types(info))) or "(none registered)"
            raise ValueError(f"rule {self.name!r} needs a fault (valid types: {valid}) unless schedule.quota is set")
        self._check_response_stage(info)
        self._check_signed(info)
        self._check_events(info)
        self._check_mcp_era(info)
        return self

    def _check_signed(self, info: ValidationInfo) -> None:
        # A provider whose requests are signed over their body (Bedrock: AWS SigV4) would reject an edited
        # request as a forgery: the fault would test brownout, not the agent.
        signed = context_value(info, "signed_providers", wire.BUILTIN.signed_providers)
        cls = fault_types(info).get(self.fault_type)
        if self.match.provider in signed and cls is not None and cls.edit_request is not Fault.edit_request:
            raise ValueError(
                f"rule {self.name!r}: {self.fault_type} rewrites the request, and {self.match.provider} requests are "
                "signed (AWS SigV4): the provider would reject the altered request as a bad signature, so brownout "
                "never alters a signed request"
            )

    def _check_events(self, info: ValidationInfo) -> None:
        """A rule on WebSocket events needs a fault that acts on events, and the other way round."""
        cls = fault_types(info).get(self.fault_type)
        if cls is None or self.fault is None:
            if self.match.on_events:
                raise ValueError(f"rule {self.name!r}: a quota counts requests, not WebSocket events (match.event)")
            return
        try:
            fault = cls(self.fault)
        except Exception:  # noqa: BLE001 - a plugin fault that cannot be built here fails where the engine builds it
            return
        if self.match.on_events:
            if not cls.acts_on_events():
                able = ", ".join(sorted(n for n, c in fault_types(info).items() if c.acts_on_events()))
                raise ValueError(
                    f"rule {self.name!r}: {self.fault_type} cannot act on WebSocket events (match.event, "
                    f"match.direction); these can: {able}"
                )
            problem = fault.event_problem()
            if problem is not None:
                raise ValueError(f"rule {self.name!r}: {problem}")
        elif fault.event_only():
            raise ValueError(
                f"rule {self.name!r}: {self.fault_type} acts on the events of realtime WebSocket sessions: "
                f"give match.event (a glob on the event type) or match.direction"
            )

    def _check_mcp_era(self, info: ValidationInfo) -> None:
        method_era = METHOD_ERAS.get(self.match.mcp_method or "")
        era = self.match.mcp_era or method_era
        if era is None:
            return
        if self.match.mcp_era is not None and method_era is not None and method_era != self.match.mcp_era:
            raise ValueError(
                f"rule {self.name!r}: {self.match.mcp_method} is a {method_era}-era method, "
                f"so match.mcp_era {self.match.mcp_era} never matches it"
            )
        cls = fault_types(info).get(self.fault_type)
        reason = cls.mcp_eras_refused.get(era) if cls is not None else None
        if reason is not None:
            raise ValueError(f"rule {self.name!r}: {self.fault_type} cannot act on {era}-era MCP requests: {reason}")

    def _check_response_stage(self, info: ValidationInfo) -> None:
        # On an LLM provider a `tool` match is decided from the response (the tool the model
        # calls): a fault that acts before the response would be recorded yet do nothing.
        llm = context_value(info, "llm_providers", wire.BUILTIN.llm_providers)
        if self.match.tool is None or self.match.provider not in llm or self.match.on_events:
            return
        cls = fault_types(info).get(self.fault_type)
        edits_body = cls is not None and (
            cls.edit_body is not Fault.edit_body or cls.stream_editor is not Fault.stream_editor
        )
        if not edits_body:
            raise ValueError(
                f"rule {self.name!r}: match.tool on provider {self.match.provider} is decided from the response, "
                f"so only faults that edit the response body apply (truncate, malformed_json, inject, http_error "
                f"with mid_stream); {self.fault_type!r} acts before the response"
            )

    @property
    def fault_type(self) -> str:
        """The fault type name, or "quota" for a quota rule with the default 429."""
        return "quota" if self.fault is None else str(getattr(self.fault, "type", type(self.fault).__name__))


def unique_rule_names(rules: list[RuleConfig]) -> list[RuleConfig]:
    """Reject duplicate rule names: decisions, counters and reloads are keyed by name."""
    dupes = sorted(name for name, n in Counter(r.name for r in rules).items() if n > 1)
    if dupes:
        raise ValueError(f"rule names must be unique; duplicated: {', '.join(dupes)}")
    return rules


# Use as the type of BrownoutConfig.rules: `rules: Rules = Field(default_factory=list)`.
Rules = Annotated[list[RuleConfig], AfterValidator(unique_rule_names)]
