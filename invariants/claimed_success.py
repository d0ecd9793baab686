"""claimed_success: the agent reported success while a call it depended on failed on the wire.

Needs the agent's own spans (`agent_spans`). A step or run claims success when its span's status is OK,
or when it is an agent run (`invoke_agent`, by default) that ended without error. A wire call failed
when it got an error (an error status, a connection error, a provider error) or a fault other than a
slowdown touched it, and no later call to the same target (the same tool; the same provider and model)
succeeded within the trace. The claim depends on the call when the call's agent span is the claiming
span or below it in the agent's trace.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brownout.core.agent_spans import STATUS_OK, STATUS_UNSET, AgentSpan
from brownout.core.joined_trace import JoinedTrace
from brownout.core.span_join import BENIGN_FAULTS, WireCall
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.both_sides import describe, on_call
from brownout.invariants.records import Violation
from brownout.invariants.session import Session

__all__ = ["ClaimedSuccess", "ClaimedSuccessConfig"]


class ClaimedSuccessConfig(InvariantConfigBase):
    """Which spans claim success, and which failures count."""

    type: Literal["claimed_success"]
    unset_claims: list[str] = Field(
        default_factory=lambda: ["invoke_agent"],
        description="Operations whose span claims success by ending without error (status unset); any span "
        "with status OK claims it.",
    )
    count_recorded: bool = Field(
        False,
        description="Flag a claim even when the agent's own span of the failed call recorded the failure "
        "(status ERROR): off, the agent knew and is taken to have handled it.",
    )
    benign_faults: list[str] = Field(
        default_factory=lambda: sorted(BENIGN_FAULTS),
        description="Faults that only slow a call down: a call they touched did not fail.",
    )


class ClaimedSuccess(Invariant[ClaimedSuccessConfig]):
    """One violation per failed call a success claim depended on, naming the spans that claimed."""

    type = "claimed_success"
    Config = ClaimedSuccessConfig

    def __init__(self, config: ClaimedSuccessConfig) -> None:
        super().__init__(config)
        self._benign = frozenset(config.benign_faults)
        self._unset = frozenset(config.unset_claims)

    def _claims(self, span: AgentSpan) -> bool:
        if span.failed:
            return False
        return span.status == STATUS_OK or (span.status == STATUS_UNSET and span.operation in self._unset)

    def check_trace(self, trace: JoinedTrace, session: Session) -> list[Violation]:
        claimers = {s.span_id: s for s in trace.agent_spans if self._claims(s)}
        if not claimers:
            return []
        pairs = trace.pairs()
        # The last start of a call that went well, per target: a broken call before it was retried.
        last_ok: dict[tuple[str, str | None, str | None], float] = {}
        for call, _ in pairs:
            if not call.broken(self._benign):
                last_ok[call.target] = max(last_ok.get(call.target, call.start_s), call.start_s)
        found: list[Violation] = []
        for call, own in pairs:
            if not call.broken(self._benign) or last_ok.get(call.target, -1.0) >= call.start_s:
                continue
            if own is not None and own.failed and not self.config.count_recorded:
                continue  # the agent's span of that call says it failed: the agent knew
            claiming = _claiming(trace, claimers, call, own)
            if not claiming:
                continue
            claimed = ", ".join(f"{s.name!r} ({s.span_id})" for s in claiming)
            why = "failed" if call.failed else f"was faulted ({', '.join(call.faults)})"
            found.append(
                on_call(
                    self,
                    f"the agent reported success ({claimed}) while {describe(call)} {why} and was not "
                    "retried successfully",
                    session,
                    call,
                    agent=own,
                    details={"claimed_by": [s.span_id for s in claiming], "faults": list(call.faults)},
                )
            )
        return found


def _claiming(
    trace: JoinedTrace, claimers: dict[str, AgentSpan], call: WireCall, own: AgentSpan | None
) -> list[AgentSpan]:
    """The claims that cover the call: its agent span and those above it (not joined: those around it in time)."""
    if own is not None:
        return [claimers[i] for i in trace.ancestors(own.span_id) if i in claimers]
    return [s for s in claimers.values() if s.start_s <= call.start_s and call.end_s <= s.end_s]
