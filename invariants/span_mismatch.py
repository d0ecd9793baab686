"""span_mismatch: the agent's span and the wire disagree about the same call.

Needs the agent's own spans (`agent_spans`). For each wire call and the agent span it belongs to: the
model (the request's, else the response's: one naming the other's dated version agrees), token usage
(the agent span's against the wire calls it made, summed: the SDK's retries are several calls under one
span) beyond a tolerance, and a tool call's arguments (the agent's `gen_ai.tool.call.arguments`, which
instrumentations record when content capture is on, against what the model asked for on the wire
under the same `gen_ai.tool.call.id`, compared as JSON).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Literal

from pydantic import Field

from brownout.core.agent_spans import AgentSpan
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import WireCall
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.both_sides import describe, on_call
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import canonical_arguments

__all__ = ["SpanMismatch", "SpanMismatchConfig"]

_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")


class SpanMismatchConfig(InvariantConfigBase):
    """What is compared, and how much token counts may differ."""

    type: Literal["span_mismatch"]
    severity: Severity = "warning"
    model: bool = Field(True, description="Compare the model.")
    tokens: bool = Field(True, description="Compare input and output token counts.")
    token_tolerance_pct: float = Field(
        5.0, ge=0, description="Token counts that differ by at most this percent (and 1 token) agree."
    )
    arguments: bool = Field(True, description="Compare a tool call's arguments with what the model asked for.")


class SpanMismatch(Invariant[SpanMismatchConfig]):
    """One violation per disagreement, tied to the wire call (the agent span in its details)."""

    type = "span_mismatch"
    Config = SpanMismatchConfig

    def check_trace(self, trace: JoinedTrace, session: Session) -> list[Violation]:
        found: list[Violation] = []
        pairs = trace.pairs()
        calls_of: dict[str, list[WireCall]] = defaultdict(list)
        for call, span in pairs:
            if span is None:
                continue
            calls_of[span.span_id].append(call)
            model = self.config.model and _model_differs(span, call)
            if model:
                found.append(on_call(self, f"{describe(call)}: {model}", session, call, agent=span))
        for span in trace.agent_spans:
            calls = calls_of.get(span.span_id)
            if calls and self.config.tokens and span.is_llm:
                problem = self._tokens(span, calls)
                if problem:
                    found.append(on_call(self, problem, session, calls[-1], agent=span))
        if self.config.arguments:
            found += self._arguments(trace, session)
        return found

    def _tokens(self, span: AgentSpan, calls: list[WireCall]) -> str | None:
        for kind, agent, wire in (
            ("input", span.input_tokens, _sum(c.input_tokens for c in calls)),
            ("output", span.output_tokens, _sum(c.output_tokens for c in calls)),
        ):
            if agent is None or wire is None:
                continue
            allowed = max(1.0, wire * self.config.token_tolerance_pct / 100)
            if abs(agent - wire) > allowed:
                return (
                    f"the agent's span {span.name!r} ({span.span_id}) reports {agent} {kind} tokens, the wire "
                    f"{wire} over {len(calls)} call(s)"
                )
        return None

    def _arguments(self, trace: JoinedTrace, session: Session) -> list[Violation]:
        asked = {t.id: (call, t) for call in trace.wire_calls for t in call.tool_calls if t.id}
        found: list[Violation] = []
        for span in trace.agent_spans:
            if not span.is_tool or span.tool_call_id is None or span.tool_arguments is None:
                continue
            hit = asked.get(span.tool_call_id)
            if hit is None or canonical_arguments(hit[1].arguments) == canonical_arguments(span.tool_arguments):
                continue
            call, requested = hit
            found.append(
                on_call(
                    self,
                    f"the agent ran tool call {span.tool_call_id!r} ({requested.name}) with other arguments than "
                    f"the model asked for in {describe(call)}",
                    session,
                    call,
                    agent=span,
                    details={"tool_call_id": span.tool_call_id},
                )
            )
        return found


def _model_differs(span: AgentSpan, call: WireCall) -> str | None:
    agent = span.request_model or span.response_model
    if not agent or not call.model or call.kind != "llm":
        return None
    if _undated(agent) == _undated(call.model):
        return None
    return f"the agent's span {span.name!r} ({span.span_id}) says model {agent!r}, the wire {call.model!r}"


def _undated(model: str) -> str:
    """gpt-4o-2024-08-06 -> gpt-4o, claude-3-5-haiku-20241022 -> claude-3-5-haiku: one names the other's version."""
    return _DATED.sub("", model.strip().lower())


def _sum(values: object) -> int | None:
    known = [v for v in values if isinstance(v, int)]  # type: ignore[attr-defined]
    return sum(known) if known else None
