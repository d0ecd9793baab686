"""The `agent_spans:` config section: the agent's own spans, received or intercepted, joined to the wire.

    agent_spans:
      receiver: {listen: "127.0.0.1:4318"}   # an OTLP/HTTP receiver agents export to
      join_wait_s: 6

Without the section brownout still recognises OTLP exports that cross it (and leaves them alone), but
keeps no spans and joins nothing, unless an invariant that needs both sides is configured.
"""

from __future__ import annotations

from pydantic import Field

from brownout.core.config import Model
from brownout.exporters.config import ListenConfig

__all__ = ["AgentSpansConfig", "ReceiverConfig"]


class ReceiverConfig(ListenConfig):
    """`agent_spans.receiver`: OTLP over HTTP (protobuf and JSON) on this address."""

    listen: str = Field("127.0.0.1:4318", description="host:port of the OTLP/HTTP receiver (port 0 picks one).")
    forward: bool = Field(
        True,
        description="Forward every request received, unchanged, to exporters.otlp's endpoint (when OTLP export "
        "is on), so brownout can sit in front of a collector.",
    )
    max_body_bytes: int = Field(16 * 1024 * 1024, ge=1024, description="Largest export request accepted (413 above).")


class AgentSpansConfig(Model):
    """The `agent_spans:` section."""

    receiver: ReceiverConfig | None = Field(None, description="An OTLP/HTTP receiver; unset: none.")
    join_wait_s: float = Field(
        6.0,
        ge=0,
        le=120,
        description="How long a call without trace context waits for the agent span it belongs to before its "
        "span is built anyway (agents' exporters send every few seconds).",
    )
    settle_s: float = Field(
        10.0, gt=0, description="A trace is judged by the invariants that need both sides once quiet this long."
    )
    skew_ms: float = Field(
        0.0,
        ge=0,
        description="How far the agent's clock may be off brownout's when calls are matched by time (an agent on "
        "another machine); on one machine 0: a span that starts after a call began cannot be its.",
    )
    ttl_s: float = Field(600.0, gt=0, description="A trace is judged and dropped this long after it was first seen.")
    max_traces: int = Field(10_000, ge=1, description="Traces held; the oldest are dropped (and counted) past it.")
    max_spans: int = Field(100_000, ge=1, description="Spans and wire calls held in all traces together.")
