"""stream_complete: a stream cut before its terminal event must not be treated as complete."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["StreamComplete", "StreamCompleteConfig"]

_PENDING_MAX = 8  # incomplete streams remembered per session
_PARTIAL_MAX_CHARS = 4000  # the head of a long partial is enough to recognise it


class StreamCompleteConfig(InvariantConfigBase):
    """`min_chars`: shorter partial text is too generic to recognise in later messages."""

    type: Literal["stream_complete"]
    min_chars: int = Field(8, ge=1)
    ignore_if_finished: bool = Field(
        True, description="A stream cut after its finish reason arrived carried all its content."
    )


@dataclass(frozen=True, slots=True)
class _Partial:
    stream: ExchangeSummary  # light summary of the incomplete stream
    text: str
    call_ids: frozenset[str]


class StreamComplete(Invariant[StreamCompleteConfig]):
    """Flags a later request that carries a truncated stream's text or tool calls as finished."""

    type = "stream_complete"
    Config = StreamCompleteConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        pending: deque[_Partial] = session.state_for(self.name, _new_pending)
        found: list[Violation] = []
        for partial in list(pending):
            reason = self._treated_complete(partial, exchange)
            if reason is not None:
                pending.remove(partial)
                found.append(
                    self.violation(
                        f"stream {partial.stream.exchange_id} ended without its terminal event, and {reason}",
                        session,
                        exchange,
                        cause=partial.stream,
                        details={
                            "truncated_exchange_id": partial.stream.exchange_id,
                            "truncated_span_id": partial.stream.span_id,
                        },
                    )
                )
        cut = exchange.stream and exchange.stream_complete is False
        if cut and not (self.config.ignore_if_finished and exchange.finish_reasons):
            text = exchange.output_text.strip()[:_PARTIAL_MAX_CHARS]
            ids = frozenset(c.id for c in exchange.requested_calls if c.id)
            if len(text) >= self.config.min_chars or ids:
                pending.append(_Partial(exchange.light(), text, ids))
        return found

    def dump_state(self, state: deque[_Partial]) -> list[list[Any]]:
        return [[dump_summary(p.stream), p.text, sorted(p.call_ids)] for p in state]

    def load_state(self, data: list[list[Any]]) -> deque[_Partial]:
        pending = _new_pending()
        pending.extend(_Partial(load_summary(stream), text, frozenset(ids)) for stream, text, ids in data)
        return pending

    def _treated_complete(self, partial: _Partial, exchange: ExchangeSummary) -> str | None:
        if len(partial.text) >= self.config.min_chars:
            for i, message in enumerate(exchange.messages):
                if message.role in ("assistant", "model") and partial.text in message.text:
                    return (
                        f"request {exchange.exchange_id} sent its partial text back as a finished "
                        f"assistant message (messages[{i}])"
                    )
        for result in exchange.tool_results:
            if result.call_id in partial.call_ids:
                return f"request {exchange.exchange_id} carries a result for its tool call {result.call_id!r}"
        if exchange.executed_call is not None and exchange.executed_call.id in partial.call_ids:
            return f"exchange {exchange.exchange_id} executed its tool call {exchange.executed_call.id!r}"
        return None


def _new_pending() -> deque[_Partial]:
    return deque(maxlen=_PENDING_MAX)
