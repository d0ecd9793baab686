"""mcp_tools: the agent uses an MCP server's tools as the server currently defines them.

Three checks on every `tools/call`, against the session's latest `tools/list` reply:
- `schema`: the arguments fit the tool's current inputSchema (a drifted schema is the current one);
- `unknown`: the tool is still offered (a removed tool is not);
- `stale`: the server announced `notifications/tools/list_changed` and the agent called a tool
  without listing again (it keeps using a definition that may have changed under it); a listing with a
  `ttlMs` (2026-07-28) may be used until it runs out, so only a call after that is stale.

Everything is ordered by when it reached the agent: a call is judged by the listings and announcements
the agent had received when it sent the call, and an announcement that reached the agent before a
listing's reply is answered by that listing (servers announce while the first listing is in flight).
Exchanges reach the invariants when they end, not in that order (a listing's reply can reach the
agent, which then calls at once, before its exchange has ended): so a call that looks wrong is judged
again, against what is known by then, once an exchange that started after the call ended is seen (or
the session closes), and reported only if it is still wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.records import Violation
from brownout.invariants.schemas import ValidatorCache, first_problem
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["McpTools", "McpToolsConfig"]

LIST_CHANGED = "notifications/tools/list_changed"
Check = Literal["schema", "unknown", "stale"]
ALL_CHECKS: tuple[Check, ...] = ("schema", "unknown", "stale")


class McpToolsConfig(InvariantConfigBase):
    """`checks`: which of schema, unknown and stale to run."""

    type: Literal["mcp_tools"]
    severity: Severity = "error"
    checks: list[Check] = Field(default_factory=lambda: list(ALL_CHECKS))


_KEEP_LISTINGS = 8  # a session's recent listings, for calls judged after a later listing arrived
_MAX_SUSPECTS = 64


@dataclass(slots=True, frozen=True)
class _Offer:
    """One tools/list reply: when the agent had it, what it offered, and for how long it is fresh (ttlMs)."""

    delivered: float
    tools: dict[str, dict[str, Any] | None]
    listed_in: str
    ttl_s: float | None = None  # None: no ttlMs; the listing holds until the server announces a change

    def fresh_at(self, t: float) -> bool:
        """The server said the listing may be used without fetching it again until then."""
        return self.ttl_s is not None and t <= self.delivered + self.ttl_s


@dataclass(slots=True, frozen=True)
class _Announcement:
    """One notifications/tools/list_changed: when it reached the agent, and the exchange that recorded it."""

    delivered: float
    exchange_id: str


@dataclass(slots=True)
class _Listing:
    """What the session's server offers, as its tools/list replies and list_changed notifications said."""

    offers: list[_Offer] = field(default_factory=list)  # by delivery time; empty: never listed
    announcements: list[_Announcement] = field(default_factory=list)  # by delivery time
    stale_reported: set[tuple[str, str]] = field(default_factory=set)  # (announcement's exchange, tool)
    suspects: list[ExchangeSummary] = field(default_factory=list)  # calls that looked wrong, to judge again

    def offer_for(self, call: ExchangeSummary) -> _Offer | None:
        """The latest listing the agent had received when it sent `call`."""
        known = [o for o in self.offers if o.delivered <= call.start]
        return known[-1] if known else None

    def announced_for(self, call: ExchangeSummary) -> _Announcement | None:
        """The latest list_changed the agent had received when it sent `call`."""
        known = [a for a in self.announcements if a.delivered <= call.start]
        return known[-1] if known else None

    def announce(self, delivered: float, exchange_id: str) -> None:
        announcement = _Announcement(delivered, exchange_id)
        self.announcements = sorted([*self.announcements, announcement], key=lambda a: a.delivered)[-_KEEP_LISTINGS:]
        kept = {a.exchange_id for a in self.announcements}
        self.stale_reported = {k for k in self.stale_reported if k[0] in kept}


def _delivered(exchange: ExchangeSummary) -> float:
    """When the reply reached the agent: its first bytes; a server's long-lived stream (no JSON-RPC method)
    only at its end, since when on the stream a notification came is not kept."""
    if exchange.ttfc_s is None or exchange.mcp_method is None:
        return exchange.end
    return exchange.start + exchange.ttfc_s


class McpTools(Invariant[McpToolsConfig]):
    """Judges MCP tool calls by the server's current definitions, over HTTP and stdio."""

    type = "mcp_tools"
    Config = McpToolsConfig

    def __init__(self, config: McpToolsConfig) -> None:
        super().__init__(config)
        self._validators = ValidatorCache()

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        if exchange.provider != "mcp":
            return []
        state: _Listing = session.state_for(self.name, _Listing)
        for method, delivered in exchange.notifications_before:  # stdio: the server's own, as they passed
            if method == LIST_CHANGED:
                state.announce(delivered, exchange.exchange_id)
        if LIST_CHANGED in exchange.server_notifications:  # with this exchange's reply
            state.announce(_delivered(exchange), exchange.exchange_id)
        if exchange.mcp_method == "tools/list" and exchange.error_type is None:
            ttl = exchange.mcp_ttl_ms
            offer = _Offer(
                _delivered(exchange),
                {t.name: t.schema for t in exchange.tools_declared},
                exchange.exchange_id,
                None if ttl is None else ttl / 1000,
            )
            state.offers = sorted([*state.offers, offer], key=lambda o: o.delivered)[-_KEEP_LISTINGS:]
        # Calls that looked wrong are judged again once something started after they ended.
        settled = [c for c in state.suspects if exchange.start >= c.end]
        found = self._report(state, session, settled)
        calls = exchange.mcp_method == "tools/call" and exchange.tool_name
        if calls and len(state.suspects) < _MAX_SUSPECTS and self._judge(state, exchange):
            state.suspects.append(exchange)
        return found

    def check_session(self, session: Session, *, final: bool) -> list[Violation]:
        if not final:
            return []
        state: _Listing = session.state_for(self.name, _Listing)
        return self._report(state, session, list(state.suspects))

    def dump_state(self, state: _Listing) -> dict[str, Any]:
        # A suspect call keeps its whole arguments (validators are the invariant's, not the session's).
        return {
            "offers": [[o.delivered, o.tools, o.listed_in, o.ttl_s] for o in state.offers],
            "announcements": [[a.delivered, a.exchange_id] for a in state.announcements],
            "stale_reported": sorted(map(list, state.stale_reported)),
            "suspects": [dump_summary(replace(c.light(), executed_call=c.executed_call)) for c in state.suspects],
        }

    def load_state(self, data: dict[str, Any]) -> _Listing:
        return _Listing(
            offers=[_Offer(*offer) for offer in data["offers"]],
            announcements=[_Announcement(delivered, exchange_id) for delivered, exchange_id in data["announcements"]],
            stale_reported={(exchange_id, tool) for exchange_id, tool in data["stale_reported"]},
            suspects=[load_summary(c) for c in data["suspects"]],
        )

    def _report(self, state: _Listing, session: Session, calls: list[ExchangeSummary]) -> list[Violation]:
        found: list[Violation] = []
        for call in calls:
            state.suspects.remove(call)
            for message, details in self._judge(state, call):
                if details["check"] == "stale":  # once per tool and announcement
                    key = (details["announced_exchange_id"], details["tool"])
                    if key in state.stale_reported:
                        continue
                    state.stale_reported.add(key)
                found.append(self.violation(message, session, call, details=details))
        return found

    def _stale(self, state: _Listing, exchange: ExchangeSummary, offer: _Offer) -> list[tuple[str, dict[str, Any]]]:
        """The call went out after an announcement that no listing the agent had by then answered."""
        tool = exchange.tool_name or ""
        announced = state.announced_for(exchange)
        if announced is None or offer.delivered >= announced.delivered or offer.fresh_at(exchange.start):
            return []  # no change since the listing, or one the listing's ttlMs lets the client catch up with
        message = (
            f"tools/call {tool!r} after the server announced that its tools changed (exchange "
            f"{announced.exchange_id}) without listing them again"
        )
        details: dict[str, Any] = {"check": "stale", "tool": tool, "announced_exchange_id": announced.exchange_id}
        if offer.ttl_s is not None:
            message += f", past the listing's ttlMs {offer.ttl_s * 1000:g}"
            details["ttl_ms"] = round(offer.ttl_s * 1000)
        return [(message, details)]

    def _judge(self, state: _Listing, exchange: ExchangeSummary) -> list[tuple[str, dict[str, Any]]]:
        checks = set(self.config.checks)
        tool = exchange.tool_name or ""
        offer = state.offer_for(exchange)
        if offer is None:
            return []  # never listed: no definition to hold the call to
        found = self._stale(state, exchange, offer) if "stale" in checks else []
        if tool not in offer.tools:
            if "unknown" not in checks:
                return found
            message = f"tools/call {tool!r}, which the latest tools/list (exchange {offer.listed_in}) does not offer"
            return [*found, (message, {"check": "unknown", "tool": tool, "listed_exchange_id": offer.listed_in})]
        problem = self._schema_problem(state, offer, tool, exchange) if "schema" in checks else None
        if problem is None:
            return found
        message = f"tools/call {tool!r}: {problem} (exchange {offer.listed_in} listed it)"
        return [*found, (message, {"check": "schema", "tool": tool, "listed_exchange_id": offer.listed_in})]

    def _schema_problem(self, state: _Listing, offer: _Offer, tool: str, exchange: ExchangeSummary) -> str | None:
        call = exchange.executed_call
        schema = offer.tools.get(tool)
        if call is None or not isinstance(schema, dict):
            return None
        validator = self._validators.get(schema)
        if validator is None:
            return None  # the server's own schema is broken: nothing to hold the agent to
        try:
            value = json.loads(call.arguments or "{}")
        except ValueError:
            return "arguments are not valid JSON"
        problem = first_problem(validator, value)
        if problem is None:
            return None
        what, path = problem
        return f"arguments do not fit the current inputSchema: {what} at {path}"
