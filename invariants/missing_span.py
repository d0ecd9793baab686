"""missing_span: the agent's trace and the wire should tell of the same calls.

Needs the agent's own spans (`agent_spans`). Two gaps: an LLM or tool call on the wire that no span of
the agent's trace accounts for (an instrumentation gap: a client the agent's instrumentation does not
wrap), and an LLM span of the agent with no call on the wire (a call that went around the proxy).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.core.joined_trace import JoinedTrace
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.both_sides import describe, on_agent_span, on_call
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["MissingSpan", "MissingSpanConfig"]

Kind = Literal["llm", "tool"]
_KINDS: tuple[Kind, ...] = ("llm", "tool")


class MissingSpanConfig(InvariantConfigBase):
    """Which side's gaps to report."""

    type: Literal["missing_span"]
    severity: Severity = "warning"
    wire_calls: list[Kind] = Field(
        default_factory=lambda: list(_KINDS),
        description="Kinds of wire calls that need a span of the agent (llm, tool); [] reports none.",
    )
    agent_llm_spans: bool = Field(True, description="Report the agent's LLM spans no wire call accounts for.")
    only_when_instrumented: bool = Field(
        True,
        description="Report wire calls without spans only while the agent sends GenAI spans to brownout at all "
        "(within agent_spans.ttl_s): an agent that sends none is not instrumented, not missing spans.",
    )


class MissingSpan(Invariant[MissingSpanConfig]):
    """A violation per wire call without an agent span, and per agent LLM span without a wire call."""

    type = "missing_span"
    Config = MissingSpanConfig

    def check_trace(self, trace: JoinedTrace, session: Session) -> list[Violation]:
        found: list[Violation] = []
        pairs = trace.pairs()
        kinds = set(self.config.wire_calls)
        if kinds and (trace.instrumented or not self.config.only_when_instrumented):
            for call, span in pairs:
                if span is None and call.kind in kinds:
                    found.append(on_call(self, f"{describe(call)} has no span in the agent's trace", session, call))
        if self.config.agent_llm_spans:
            accounted = {span.span_id for _, span in pairs if span is not None}
            near = trace.wire_near or (lambda _: False)
            for span in trace.agent_spans:
                # A call another agent's span got (calls without trace context of concurrent agents can be
                # told apart by time only) still counts: only a span no call could belong to went around.
                if span.is_llm and span.span_id not in accounted and not near(span):
                    found.append(
                        on_agent_span(
                            self,
                            f"the agent's LLM span {span.name!r} ({span.span_id}) has no call on the wire: it "
                            "went around brownout",
                            session,
                            span,
                        )
                    )
        return found
