"""retry_discipline: after a 429/5xx/reset or a cut stream, retries honour retry-after, back off, and stop."""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.core.wire.mcp_messages import request_identity
from brownout.core.wire.replaykey import normalised_body
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["RetryDiscipline", "RetryDisciplineConfig"]

_ENDPOINTS_MAX = 64  # retry targets tracked per session
_STARTS_MAX = 64  # retry start times kept per chain (storm detection)
_CONCURRENT_SLACK_S = 0.001  # a request that started before the failure ended is not its retry


class RetryDisciplineConfig(InvariantConfigBase):
    """Times in seconds; a retry is the session's next request for the same thing after a failure: the same
    endpoint (METHOD host/path), and for MCP the same JSON-RPC method, tool and arguments at that endpoint."""

    type: Literal["retry_discipline"]
    max_retries: int = Field(3, ge=0, description="Retries allowed after one failure before giving up.")
    retry_after_tolerance_s: float = Field(0.1, ge=0, description="How much earlier than retry-after is tolerated.")
    max_retry_after_s: float = Field(
        60.0, gt=0, description="Longer retry-after values are not expected to be honoured (SDKs cap them)."
    )
    min_backoff_s: float = Field(
        0.15,
        ge=0,
        description="Without retry-after, a retry sooner than this did not wait (Codex CLI's first waits about 0.2 s).",
    )
    storm_requests: int = Field(5, ge=2, description="This many retries within storm_window_s is a storm.")
    storm_window_s: float = Field(2.0, gt=0)
    chain_reset_s: float = Field(120.0, gt=0, description="A request this long after the last failure starts afresh.")


@dataclass
class _Chain:
    """Consecutive failed attempts at one retry target."""

    failure: ExchangeSummary  # the latest failed answer
    first: ExchangeSummary  # the failure that started the chain (its faults are the cause)
    retries: int = 0
    starts: deque[float] = field(default_factory=lambda: deque(maxlen=_STARTS_MAX))
    reported: set[str] = field(default_factory=set)


class RetryDiscipline(Invariant[RetryDisciplineConfig]):
    """Flags ignored retry-after, no backoff, too many retries, and retry storms, once per chain each."""

    type = "retry_discipline"
    Config = RetryDisciplineConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        if exchange.operation == "realtime_inference":
            # A generation of a realtime session is no request the agent could retry (a cut one ends with its
            # socket); how it reconnects is reconnect_discipline's. Refused upgrades are judged here.
            return []
        chains: OrderedDict[str, _Chain] = session.state_for(self.name, OrderedDict)
        key = _chain_key(exchange)
        chain = chains.get(key)
        found: list[Violation] = []
        if chain is not None and exchange.start - chain.failure.end > self.config.chain_reset_s:
            chain = None
            del chains[key]
        is_retry = chain is not None and exchange.start >= chain.failure.end - _CONCURRENT_SLACK_S
        if chain is not None and is_retry and chain.failure.stream_cut and not _repeats(exchange, chain.failure):
            # After a cut stream the client has part of an answer: a request that is not the same one again
            # (the next turn, carrying what arrived) goes on with it rather than retrying.
            del chains[key]
            chain, is_retry = None, False
        if chain is not None and is_retry:
            found += self._judge(chain, exchange, session)
        elif exchange.retry_count is not None and exchange.retry_count > self.config.max_retries:
            # No failure seen here (e.g. the client timed out on its own), but the SDK says so.
            found.append(self._too_many(exchange.retry_count, exchange, exchange, session))
        if exchange.is_failure:
            if chain is None:
                chain = _Chain(failure=exchange, first=exchange)
                chains[key] = chain
                while len(chains) > _ENDPOINTS_MAX:
                    chains.popitem(last=False)
            elif is_retry:
                chain.failure = exchange
            chains.move_to_end(key)
        elif is_retry:
            del chains[key]  # the retry succeeded: the chain is over
        return found

    def _judge(self, chain: _Chain, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        cfg = self.config
        chain.retries += 1
        chain.starts.append(exchange.start)
        gap = exchange.start - chain.failure.end
        found: list[Violation] = []
        retry_after = chain.failure.retry_after_s
        if retry_after is not None and retry_after <= cfg.max_retry_after_s:
            if gap + cfg.retry_after_tolerance_s < retry_after and "retry_after" not in chain.reported:
                chain.reported.add("retry_after")
                found.append(
                    self.violation(
                        f"retried {exchange.retry_target} after {gap:.3f} s; the {chain.failure.status or 'failed'} "
                        f"answer asked for retry-after {retry_after:g} s",
                        session,
                        exchange,
                        cause=chain.first,
                        details={"gap_s": round(gap, 4), "retry_after_s": retry_after, "check": "retry_after"},
                    )
                )
        elif gap < cfg.min_backoff_s and "backoff" not in chain.reported:
            chain.reported.add("backoff")
            found.append(
                self.violation(
                    f"retried {exchange.retry_target} {gap:.3f} s after a failure without backing off "
                    f"(min {cfg.min_backoff_s:g} s)",
                    session,
                    exchange,
                    cause=chain.first,
                    details={"gap_s": round(gap, 4), "min_backoff_s": cfg.min_backoff_s, "check": "backoff"},
                )
            )
        retries = max(chain.retries, exchange.retry_count or 0)
        if retries > cfg.max_retries and "max_retries" not in chain.reported:
            chain.reported.add("max_retries")
            found.append(self._too_many(retries, exchange, chain.first, session))
        recent = sum(1 for t in chain.starts if exchange.start - t <= cfg.storm_window_s)
        if recent >= cfg.storm_requests and "storm" not in chain.reported:
            chain.reported.add("storm")
            found.append(
                self.violation(
                    f"retry storm: {recent} retries of {exchange.retry_target} within {cfg.storm_window_s:g} s",
                    session,
                    exchange,
                    cause=chain.first,
                    details={"retries": recent, "window_s": cfg.storm_window_s, "check": "storm"},
                )
            )
        return found

    def dump_state(self, state: OrderedDict[str, _Chain]) -> list[list[Any]]:
        return [
            [
                target,
                _dump_failure(c.failure),
                dump_summary(c.first.light()),
                c.retries,
                list(c.starts),
                sorted(c.reported),
            ]
            for target, c in state.items()
        ]

    def load_state(self, data: list[list[Any]]) -> OrderedDict[str, _Chain]:
        chains: OrderedDict[str, _Chain] = OrderedDict()
        for target, failure, first, retries, starts, reported in data:
            chain = _Chain(
                load_summary(failure), load_summary(first), retries, deque(starts, maxlen=_STARTS_MAX), set(reported)
            )
            chains[target] = chain
        return chains

    def _too_many(self, retries: int, exchange: ExchangeSummary, cause: ExchangeSummary, session: Session) -> Violation:
        return self.violation(
            f"{retries} retries of {exchange.retry_target}, more than max_retries {self.config.max_retries}",
            session,
            exchange,
            cause=cause,
            details={"retries": retries, "max_retries": self.config.max_retries, "check": "max_retries"},
        )


def _chain_key(exchange: ExchangeSummary) -> str:
    """Which chain a request belongs to: its retry target, and for MCP (one endpoint, many calls) also what
    the request asks, so that a call of the same tool with other arguments is another request, not a retry."""
    if exchange.provider != "mcp":
        return exchange.retry_target
    return f"{exchange.retry_target} {request_identity(exchange.request_body)}"


def _dump_failure(failure: ExchangeSummary) -> dict[str, Any]:
    """What a later retry is judged against; the request body only after a cut stream (`_repeats` reads it)."""
    light = failure.light()
    return dump_summary(replace(light, request_body=failure.request_body) if failure.stream_cut else light)


def _repeats(exchange: ExchangeSummary, earlier: ExchangeSummary) -> bool:
    """The same request again: equal bodies once the fields that vary from call to call are left out."""
    capped = max(exchange.request_bytes, earlier.request_bytes) > exchange.capture_max_bytes
    if capped and exchange.request_bytes != earlier.request_bytes:
        return False  # only the first capture_max_bytes of each body were kept: their sizes must agree too
    if exchange.request_body == earlier.request_body:
        return True
    return bool(normalised_body(exchange.request_body.encode()) == normalised_body(earlier.request_body.encode()))
