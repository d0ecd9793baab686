"""What the fault engine runs: a rule set, and each rule compiled for the hot path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brownout.core import wire
from brownout.core.exchange import Exchange
from brownout.faults import REGISTRY
from brownout.faults.base import Fault
from brownout.faults.config import RuleConfig
from brownout.faults.match import CompiledMatch
from brownout.faults.schedule import Schedule

__all__ = ["CompiledRule", "RuleSet", "websocket_handshake"]


@dataclass(frozen=True, slots=True)
class RuleSet:
    """What the engine runs: the rules, the seed every decision derives from, and the types they may use."""

    rules: Sequence[RuleConfig] = ()
    seed: int = 0
    session_ttl_s: float = 300.0  # per-session counters are dropped after this much silence
    fault_types: Mapping[str, type[Fault]] = field(default_factory=lambda: REGISTRY)
    llm_providers: frozenset[str] = wire.BUILTIN.llm_providers  # a `tool` match waits for their responses


def websocket_handshake(exchange: Exchange) -> bool:
    """An HTTP/1.1 upgrade request to a WebSocket (RFC 6455): `Upgrade: websocket`."""
    return exchange.request_headers.get("upgrade", "").strip().lower() == "websocket"


@dataclass(slots=True)
class CompiledRule:
    """A rule ready for the hot path: compiled match, live schedule, fault class."""

    name: str
    config: RuleConfig
    match: CompiledMatch
    schedule: Schedule
    fault_cls: type[Fault]
    fault_type: str
    enabled: bool
    # Only quota rules with a token limit need the exchange's usage at finish.
    counts_tokens: bool = False
    # Its fault can act on a WebSocket handshake (see Fault.acts_on_handshake); quota rules answer 429.
    acts_on_handshake: bool = True
    # Bound by a counter beyond the session's match index: a shared store decides it.
    counted: bool = False
    # Its fault acts only on the answer (see Fault.acts_before_upstream): a shared store decides it while the
    # request travels upstream. Quota rules answer 429 in upstream's place, so never.
    in_flight: bool = False
    key: str = ""  # keys its counters in a shared store (name and counter shape)
    # What its fault broke for good (Fault.follows_up), kept across hot reloads of the rule.
    memory: dict[str, Any] = field(default_factory=dict)
    follows_up: bool = False
