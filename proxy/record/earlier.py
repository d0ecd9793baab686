"""The faults that fired in each session while replaying: a miss that follows one may be its doing.

A fault changes what the agent sees (a cut stream, an error, a corrupted tool call), so the agent may
next send what it never sent while recording: a retry with other text, a repair prompt, another tool
call. Such a request has no recording. The miss cannot be told apart from a cassette that is simply
incomplete, so it names the fault as a likely cause rather than as the cause.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass

from brownout.faults.decisions import Decision
from brownout.faults.schedule import SKIPPED_NOT_APPLICABLE

__all__ = ["EarlierFaults", "FiredFault"]

_SESSIONS_MAX = 4096  # sessions remembered (least recently faulted forgotten first): bounded memory
_PER_SESSION = 8  # fired faults kept per session: the latest one of another exchange is what is asked for


@dataclass(frozen=True, slots=True)
class FiredFault:
    """A fault that fired on one exchange of a session."""

    exchange_id: str
    rule: str
    fault: str

    def describe(self) -> str:
        return f"rule {self.rule!r} ({self.fault})"


class EarlierFaults:
    """A decision sink remembering, per session, the faults that fired on its recent exchanges."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[str, deque[FiredFault]] = OrderedDict()

    def __call__(self, decision: Decision) -> None:
        fired = self._sessions.get(decision.session)
        if decision.fired:
            if fired is None:
                fired = self._sessions[decision.session] = deque(maxlen=_PER_SESSION)
                if len(self._sessions) > _SESSIONS_MAX:
                    self._sessions.popitem(last=False)
            self._sessions.move_to_end(decision.session)
            fired.append(FiredFault(decision.exchange_id, decision.rule, decision.fault))
        elif decision.outcome == SKIPPED_NOT_APPLICABLE and fired:
            # it fired, then could not act on this exchange: it changed nothing the agent saw
            gone = FiredFault(decision.exchange_id, decision.rule, decision.fault)
            if gone in fired:
                fired.remove(gone)

    def before(self, session: str, exchange_id: str) -> FiredFault | None:
        """The latest fault that fired in `session` on an exchange other than `exchange_id`."""
        for fault in reversed(self._sessions.get(session, ())):
            if fault.exchange_id != exchange_id:
                return fault
        return None
