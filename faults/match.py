"""Compiled match predicates: a MatchConfig becomes a list of cheap checks, built once at load.

Matching has two stages because of `tool`. An MCP tools/call or a plain tool API names its
tool in the request (`exchange.tool_name`), so the rule is decided at request time. An LLM
request only learns which tools the model calls from the response (`exchange.tool_calls`),
so such a rule matches at the request stage as DEFER and is decided later by
`CompiledMatch.response_match` once the tool calls are parsed.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from enum import IntEnum

from brownout.core import wire
from brownout.core.exchange import Exchange
from brownout.core.wire.otlp import PROVIDER as OTLP
from brownout.faults.config import MatchConfig

__all__ = ["ByHost", "CompiledMatch", "Stage", "compile_glob"]

_Check = Callable[[Exchange], bool]


class Stage(IntEnum):
    """Outcome of the request-stage match."""

    NO = 0
    YES = 1
    DEFER = 2  # everything else matched; the tool is known only from the response


def compile_glob(pattern: str, *, ignore_case: bool = False) -> Callable[[str], bool]:
    """An fnmatch glob as a compiled full-match predicate (fnmatchcase semantics)."""
    if not any(c in pattern for c in "*?["):
        if ignore_case:
            folded = pattern.casefold()
            return lambda s: s.casefold() == folded
        return pattern.__eq__
    rx = re.compile(fnmatch.translate(pattern), re.IGNORECASE if ignore_case else 0)
    return lambda s: rx.match(s) is not None


def _path_only(path: str) -> str:
    i = path.find("?")
    return path if i < 0 else path[:i]


class CompiledMatch:
    """A MatchConfig compiled into request-stage checks plus an optional tool glob."""

    __slots__ = ("_checks", "_direction", "_event", "_llm", "_tool", "config", "host", "on_events")

    def __init__(self, config: MatchConfig, *, llm_providers: frozenset[str] = wire.BUILTIN.llm_providers) -> None:
        self.config = config
        self._llm = llm_providers  # providers whose responses carry model tool calls
        self._checks: tuple[_Check, ...] = tuple(self._build(config))
        self._tool = compile_glob(config.tool) if config.tool is not None else None
        # The host glob alone (None: any host), for `ByHost`.
        self.host = compile_glob(config.host, ignore_case=True) if config.host is not None else None
        # Decided per event of a realtime WebSocket session, never at the request (see event_stage).
        self.on_events = config.event is not None or config.direction is not None
        self._event = compile_glob(config.event) if config.event is not None else None
        self._direction = config.direction

    @staticmethod
    def _build(c: MatchConfig) -> list[_Check]:
        # Cheapest and most selective checks first: most traffic fails on the first one.
        checks: list[_Check] = []
        if c.provider is not None:
            provider = c.provider
            checks.append(lambda ex: ex.provider == provider)
        else:
            # The agent's own telemetry (OTLP exports) is never its work: only a rule that names it acts on it.
            checks.append(lambda ex: ex.provider != OTLP)
        if c.method is not None:
            method = c.method.upper()
            checks.append(lambda ex: ex.method.upper() == method)
        if c.stream is not None:
            stream = c.stream
            checks.append(lambda ex: ex.stream is stream)
        if c.operation is not None:
            operation = c.operation
            checks.append(lambda ex: ex.operation == operation)
        if c.host is not None:
            host = compile_glob(c.host, ignore_case=True)
            checks.append(lambda ex: host(ex.host))
        if c.path is not None:
            path = compile_glob(c.path)
            checks.append(lambda ex: path(_path_only(ex.path)))
        if c.model is not None:
            model = compile_glob(c.model)
            checks.append(lambda ex: ex.model is not None and model(ex.model))
        if c.session is not None:
            session = compile_glob(c.session)
            checks.append(lambda ex: session(ex.session))
        if c.mcp_method is not None:
            mcp = compile_glob(c.mcp_method)
            checks.append(lambda ex: ex.mcp_method is not None and mcp(ex.mcp_method))
        if c.mcp_era is not None:
            era = c.mcp_era
            checks.append(lambda ex: ex.mcp_era == era)
        for name, glob in c.header.items():
            checks.append(_header_check(name, compile_glob(glob)))
        return checks

    def request_stage(self, ex: Exchange) -> Stage:
        """Match everything known at request time; DEFER when only the response can tell the tool."""
        if self.on_events:
            return Stage.NO
        for check in self._checks:
            if not check(ex):
                return Stage.NO
        tool = self._tool
        if tool is None:
            return Stage.YES
        if ex.tool_name is not None:
            return Stage.YES if tool(ex.tool_name) else Stage.NO
        return Stage.DEFER if ex.provider in self._llm else Stage.NO

    def event_stage(self, ex: Exchange, event_type: str, direction: str, tools: tuple[str, ...] = ()) -> bool:
        """Whether an event of a realtime session matches: the session's request (host, path, model,
        headers, ...), the event's type and direction, and (with `tool`) a tool the event calls."""
        if self._direction is not None and direction != self._direction:
            return False
        if self._event is not None and not self._event(event_type):
            return False
        for check in self._checks:
            if not check(ex):
                return False
        tool = self._tool
        return tool is None or any(tool(name) for name in tools)

    def response_match(self, ex: Exchange) -> str | None:
        """The first tool the response calls that the tool glob matches, else None."""
        tool = self._tool
        if tool is None:
            return None
        for call in ex.tool_calls:
            if call.name and tool(call.name):
                return call.name
        return None


def _header_check(name: str, glob: Callable[[str], bool]) -> _Check:
    def check(ex: Exchange) -> bool:
        value = ex.request_headers.get(name)
        return value is not None and glob(value)

    return check


class ByHost[R]:
    """Rules narrowed to those whose host glob admits a host (and those with none), in their order.

    Worked out once per host and kept (for the last `MAX_HOSTS` hosts): with thousands of rules, each
    for its own host, a request then checks the few that can match it instead of every rule. The
    host check stays in each rule's match, so this changes what is checked, never what matches."""

    MAX_HOSTS = 256

    def __init__(self, rules: tuple[R, ...], match_of: Callable[[R], CompiledMatch]) -> None:
        self.rules = rules
        self._hosts = [match_of(r).host for r in rules]
        self._narrows = any(h is not None for h in self._hosts)
        self._seen: dict[str, tuple[R, ...]] = {}

    def __call__(self, host: str) -> tuple[R, ...]:
        if not self._narrows:
            return self.rules
        found = self._seen.get(host)
        if found is None:
            found = tuple(r for r, h in zip(self.rules, self._hosts, strict=True) if h is None or h(host))
            if len(self._seen) >= self.MAX_HOSTS:
                self._seen.clear()  # hosts a proxy sees are few; many means they change: start again
            self._seen[host] = found
        return found
