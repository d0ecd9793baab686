"""mcp_tools: the agent uses an MCP server's tools as the server currently defines them.

Three checks on every `tools/call`, against the session's latest `tools/list` reply:
- `schema`: the arguments fit the tool's current inputSchema (a drifted schema is the current one);
- `unknown`: the tool is still offered (a removed tool is not);
- `stale`: the server announced `notifications/tools/list_changed` and the agent called a tool
  without listing again (it keeps using a definition that may have changed under it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from pydantic import Field

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity
from brownout.invariants.records import Violation
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary

__all__ = ["McpTools", "McpToolsConfig"]

LIST_CHANGED = "notifications/tools/list_changed"
Check = Literal["schema", "unknown", "stale"]
ALL_CHECKS: tuple[Check, ...] = ("schema", "unknown", "stale")


class McpToolsConfig(InvariantConfigBase):
    """`checks`: which of schema, unknown and stale to run."""

    type: Literal["mcp_tools"]
    severity: Severity = "error"
    checks: list[Check] = Field(default_factory=lambda: list(ALL_CHECKS))


@dataclass(slots=True)
class _Listing:
    """What the session's server offers, as its latest tools/list said."""

    tools: dict[str, dict[str, Any] | None] | None = None  # None: never listed in this session
    listed_in: str | None = None  # the exchange id of that listing
    changed_in: str | None = None  # the exchange that carried an unanswered list_changed
    stale_reported: set[str] = field(default_factory=set)
    validators: dict[str, Any] = field(default_factory=dict)


class McpTools(Invariant[McpToolsConfig]):
    """Judges MCP tool calls by the server's current definitions, over HTTP and stdio."""

    type = "mcp_tools"
    Config = McpToolsConfig

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        if exchange.provider != "mcp":
            return []
        state: _Listing = session.state_for(self.name, _Listing)
        if LIST_CHANGED in exchange.notifications_before:
            self._changed(state, exchange.exchange_id)  # stdio: announced before this request was sent
        found: list[Violation] = []
        if exchange.mcp_method == "tools/list" and exchange.error_type is None:
            state.tools = {t.name: t.schema for t in exchange.tools_declared}
            state.listed_in, state.changed_in = exchange.exchange_id, None
            state.validators.clear()
        elif exchange.mcp_method == "tools/call" and exchange.tool_name:
            found = [self.violation(msg, session, exchange, details=d) for msg, d in self._judge(state, exchange)]
        if LIST_CHANGED in exchange.server_notifications:
            self._changed(state, exchange.exchange_id)  # announced in this exchange's reply
        return found

    @staticmethod
    def _changed(state: _Listing, exchange_id: str) -> None:
        if state.changed_in is None:
            state.changed_in = exchange_id
            state.stale_reported.clear()

    def _judge(self, state: _Listing, exchange: ExchangeSummary) -> list[tuple[str, dict[str, Any]]]:
        checks = set(self.config.checks)
        tool = exchange.tool_name or ""
        out: list[tuple[str, dict[str, Any]]] = []
        if "stale" in checks and state.changed_in is not None and tool not in state.stale_reported:
            state.stale_reported.add(tool)
            out.append(
                (
                    f"tools/call {tool!r} after the server announced that its tools changed (exchange "
                    f"{state.changed_in}) without listing them again",
                    {"check": "stale", "tool": tool, "announced_exchange_id": state.changed_in},
                )
            )
        if state.tools is None:
            return out
        if tool not in state.tools:
            if "unknown" in checks:
                out.append(
                    (
                        f"tools/call {tool!r}, which the latest tools/list (exchange {state.listed_in}) does not offer",
                        {"check": "unknown", "tool": tool, "listed_exchange_id": state.listed_in},
                    )
                )
            return out
        problem = self._schema_problem(state, tool, exchange) if "schema" in checks else None
        if problem is not None:
            out.append(
                (
                    f"tools/call {tool!r}: {problem} (exchange {state.listed_in} listed it)",
                    {"check": "schema", "tool": tool, "listed_exchange_id": state.listed_in},
                )
            )
        return out

    def _schema_problem(self, state: _Listing, tool: str, exchange: ExchangeSummary) -> str | None:
        call = exchange.executed_call
        schema = (state.tools or {}).get(tool)
        if call is None or not isinstance(schema, dict):
            return None
        validator = state.validators.get(tool)
        if validator is None:
            cls = validators.validator_for(schema)
            try:
                cls.check_schema(schema)
            except schema_errors.SchemaError:
                return None  # the server's own schema is broken: nothing to hold the agent to
            validator = state.validators[tool] = cls(schema)
        try:
            value = json.loads(call.arguments or "{}")
        except ValueError:
            return "arguments are not valid JSON"
        error = schema_errors.best_match(validator.iter_errors(value))
        if error is None:
            return None
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        if error.validator in ("required", "additionalProperties", "dependentRequired"):
            # These messages name schema properties, never argument values.
            return f"arguments do not fit the current inputSchema: {error.message} at {path}"
        return f"arguments do not fit the current inputSchema: `{error.validator}` failed at {path}"
