"""tool_arguments_json: every tool call's arguments parse as a JSON object (and match the schema)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import ConfigDict, Field

from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.schemas import ValidatorCache, first_problem
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary, ToolCallView

__all__ = ["ToolArgumentsJson", "ToolArgumentsJsonConfig"]


class ToolArgumentsJsonConfig(InvariantConfigBase):
    """`schema`: validate against the tool's schema declared earlier in the same session: true for every
    call, false never, unset for arguments that arrived as JSON objects (they cannot be bad JSON)."""

    type: Literal["tool_arguments_json"]
    # `schema` would shadow a BaseModel attribute, so the field is schema_ with the key `schema`.
    schema_: bool | None = Field(None, alias="schema")

    model_config = ConfigDict(populate_by_name=True)  # strict and frozen come from the config base


class ToolArgumentsJson(Invariant[ToolArgumentsJsonConfig]):
    """Checks model-requested tool calls and executed tool calls (MCP tools/call, tool APIs)."""

    type = "tool_arguments_json"
    Config = ToolArgumentsJsonConfig

    def __init__(self, config: ToolArgumentsJsonConfig) -> None:
        super().__init__(config)
        self._validators = ValidatorCache()

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        # A stream cut before its finish reason holds half-sent tool calls: their arguments are cut,
        # not malformed. Whether the agent went on to use them is stream_complete's judgement.
        cut = exchange.stream_cut
        calls = [] if cut else list(exchange.requested_calls)
        executed = exchange.executed_call
        if executed is not None and executed.arguments and not executed.from_query:
            calls.append(executed)
        found: list[Violation] = []
        for index, call in enumerate(calls):
            problem = self._problem(call, session)
            if problem is not None:
                where = "executed" if call is exchange.executed_call else f"tool_calls[{index}]"
                found.append(
                    self.violation(
                        f"tool call {call.name!r} ({where}): {problem}",
                        session,
                        exchange,
                        details={"tool": call.name, "call_id": call.id, "location": where},
                    )
                )
        return found

    def _problem(self, call: ToolCallView, session: Session) -> str | None:
        try:
            value = json.loads(call.arguments)
        except json.JSONDecodeError as exc:
            # Position only: the message must not echo the argument text.
            return f"arguments are not valid JSON ({exc.msg} at char {exc.pos})"
        except ValueError:  # not UTF-8 and the like: nothing positional to say
            return "arguments are not valid JSON"
        if not isinstance(value, dict):
            return f"arguments are JSON {type(value).__name__}, not an object"
        check_schema = self.config.schema_
        if not (call.from_object if check_schema is None else check_schema):
            return None
        schema = session.tools.get(call.name)
        validator = self._validators.get(schema) if isinstance(schema, dict) else None
        if validator is None:
            return None
        problem = first_problem(validator, value)
        if problem is None:
            return None
        what, path = problem
        return f"arguments do not match the declared schema: {what} at {path}"
