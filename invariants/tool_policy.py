"""tool_policy: the tool calls an agent makes keep to a policy: which tools, which arguments, how often, in what order.

It reads the calls every invariant sees: the tool calls a model asks for in LLM responses ("model")
and the calls carried out over MCP `tools/call` or a plain tool API ("executed"). Each source is
counted and ordered on its own, so an agent that executes what the model asked for is not counted
twice. A breach names the call and the rule it breaks, never an argument's value.

When the session met a fault that planted an instruction (`inject` in a tool result, `mutate` with
`kind: inject` in a request), breaches from then on carry that fault's rule and type: a planted
instruction that made the agent misuse a tool shows up as such.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any, Literal

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from pydantic import ConfigDict, Field, field_validator, model_validator

from brownout.core.config import Model
from brownout.core.spans import ExchangeSpan
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.records import Violation
from brownout.invariants.schemas import Compiled, compile_schema, first_problem, outside_refs
from brownout.invariants.session import Session
from brownout.invariants.summary import ExchangeSummary, ToolCallView
from brownout.invariants.summary_codec import dump_summary, load_summary

__all__ = ["ArgumentRule", "OrderRule", "ToolPolicy", "ToolPolicyConfig"]


def _glob(pattern: str) -> re.Pattern[str]:
    return re.compile(translate(pattern))


class ArgumentRule(Model):
    """Constraints on the arguments of the tools whose names match `tool`."""

    tool: str = Field(min_length=1, description="Glob over tool names.")
    # `schema` would shadow a BaseModel attribute, so the field is schema_ with the key `schema`.
    schema_: dict[str, Any] | None = Field(None, alias="schema", description="JSON Schema the arguments must match.")
    match: dict[str, str | list[str]] = Field(
        default_factory=dict, description="Argument -> glob(s); the value (each item of a list) must match one."
    )
    regex: dict[str, str] = Field(
        default_factory=dict, description="Argument -> regex the value (each item of a list) must match in full."
    )

    model_config = ConfigDict(populate_by_name=True)  # strict and frozen come from the config base

    @field_validator("schema_")
    @classmethod
    def _valid_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            try:
                validators.validator_for(value).check_schema(value)
            except schema_errors.SchemaError as e:
                raise ValueError(f"not a valid JSON Schema: {e.message}") from None
            if outside := outside_refs(value):
                # Fetched during a check, it would hold up the event loop (and any URL could be named).
                raise ValueError(
                    f"$ref {outside[0]!r} names another document, which brownout does not fetch: "
                    "put that schema under $defs and refer to it as '#/$defs/...'"
                )
        return value

    @field_validator("regex")
    @classmethod
    def _valid_regexes(cls, value: dict[str, str]) -> dict[str, str]:
        for name, rx in value.items():
            try:
                re.compile(rx)
            except re.error as e:
                raise ValueError(f"regex.{name}: invalid regex: {e}") from None
        return value

    @model_validator(mode="after")
    def _some_constraint(self) -> ArgumentRule:
        if self.schema_ is None and not self.match and not self.regex:
            raise ValueError(f"arguments rule for {self.tool!r} needs schema, match and/or regex")
        return self


class OrderRule(Model):
    """A call matching `then` needs an earlier call matching `before` in the same session."""

    before: str = Field(min_length=1, description="Glob: the call that must come first (e.g. confirm_*).")
    then: str = Field(min_length=1, description="Glob: the calls that need it (e.g. delete_*).")


class ToolPolicyConfig(InvariantConfigBase):
    """Which tools may be called, with which arguments, how often per session, in what order."""

    type: Literal["tool_policy"]
    allow: list[str] | None = Field(None, description="Globs of the only tools that may be called; unset: any.")
    deny: list[str] = Field(default_factory=list, description="Globs of tools that must never be called.")
    arguments: list[ArgumentRule] = Field(default_factory=list)
    max_calls: dict[str, int] = Field(default_factory=dict, description="Tool glob -> calls allowed per session.")
    order: list[OrderRule] = Field(default_factory=list)
    calls: Literal["model", "executed", "both"] = Field("both", description="Which tool calls the policy reads.")

    @field_validator("max_calls")
    @classmethod
    def _positive(cls, value: dict[str, int]) -> dict[str, int]:
        for glob, n in value.items():
            if n < 0:
                raise ValueError(f"max_calls.{glob}: must be >= 0, got {n}")
        return value

    @model_validator(mode="after")
    def _some_rule(self) -> ToolPolicyConfig:
        if self.allow is None and not (self.deny or self.arguments or self.max_calls or self.order):
            raise ValueError("tool_policy needs at least one of allow, deny, arguments, max_calls, order")
        return self


@dataclass
class _State:
    counts: dict[tuple[str, str], int] = field(default_factory=dict)  # (source, max_calls glob) -> calls
    preceded: dict[str, set[int]] = field(default_factory=dict)  # source -> order rules whose `before` was seen
    injection: ExchangeSummary | None = None  # the latest exchange that planted an instruction


@dataclass(frozen=True, slots=True)
class _Arguments:
    rule: ArgumentRule
    where: str  # "arguments[2]"
    tool: re.Pattern[str]
    globs: dict[str, list[re.Pattern[str]]]
    regexes: dict[str, re.Pattern[str]]
    validator: Compiled | None  # None: no schema (one that is not JSON Schema fails at config load)


class ToolPolicy(Invariant[ToolPolicyConfig]):
    """Flags each tool call that breaks a rule of the policy, naming the call and the rule."""

    type = "tool_policy"
    Config = ToolPolicyConfig

    def __init__(self, config: ToolPolicyConfig) -> None:
        super().__init__(config)
        self._allow = None if config.allow is None else [_glob(g) for g in config.allow]
        self._deny = [(i, g, _glob(g)) for i, g in enumerate(config.deny)]
        self._arguments = [
            _Arguments(
                rule,
                f"arguments[{i}]",
                _glob(rule.tool),
                {k: [_glob(g) for g in ([v] if isinstance(v, str) else v)] for k, v in rule.match.items()},
                {k: re.compile(rx) for k, rx in rule.regex.items()},
                None if rule.schema_ is None else compile_schema(rule.schema_),
            )
            for i, rule in enumerate(config.arguments)
        ]
        self._max = [(g, n, _glob(g)) for g, n in config.max_calls.items()]
        self._order = [(i, rule, _glob(rule.before), _glob(rule.then)) for i, rule in enumerate(config.order)]

    def check_span(self, span: ExchangeSpan, exchange: ExchangeSummary, session: Session) -> list[Violation]:
        state: _State = session.state_for(self.name, _State)
        planted = [f for f in exchange.faults if _plants(f.params)]
        if any(f.params.get("mutated") is True for f in planted):
            state.injection = exchange.light()  # planted in this very request: its response may follow it
        found: list[Violation] = []
        for source, call in self._calls(exchange):
            for rule, problem in self._breaches(source, call, state):
                found.append(self._violation(source, call, rule, problem, exchange, session, state))
        if planted:
            state.injection = exchange.light()
        return found

    def dump_state(self, state: _State) -> dict[str, Any]:
        return {
            "counts": [[source, glob, n] for (source, glob), n in state.counts.items()],
            "preceded": {source: sorted(seen) for source, seen in state.preceded.items()},
            "injection": None if state.injection is None else dump_summary(state.injection),
        }

    def load_state(self, data: dict[str, Any]) -> _State:
        injection = data["injection"]
        return _State(
            {(source, glob): n for source, glob, n in data["counts"]},
            {source: set(seen) for source, seen in data["preceded"].items()},
            None if injection is None else load_summary(injection),
        )

    def _calls(self, exchange: ExchangeSummary) -> list[tuple[str, ToolCallView]]:
        calls: list[tuple[str, ToolCallView]] = []
        if self.config.calls in ("model", "both"):
            # A stream cut before its end holds calls the agent never got whole: not calls it made.
            cut = exchange.stream_cut
            calls += [] if cut else [("model", c) for c in exchange.requested_calls]
        if self.config.calls in ("executed", "both") and exchange.executed_call is not None:
            calls.append(("executed", exchange.executed_call))
        return calls

    def _breaches(self, source: str, call: ToolCallView, state: _State) -> list[tuple[str, str]]:
        name = call.name
        out: list[tuple[str, str]] = []
        if self._allow is not None and not any(g.match(name) for g in self._allow):
            out.append(("allow", f"not in allow {self.config.allow}"))
        out += [(f"deny[{i}]", f"denied by {glob!r}") for i, glob, g in self._deny if g.match(name)]
        args = _arguments(call)
        for arg_rule in self._arguments:
            if arg_rule.tool.match(name) and args is not None:
                out += [(arg_rule.where, problem) for problem in _argument_problems(arg_rule, args)]
        for glob, limit, g in self._max:
            if g.match(name):
                key = (source, glob)
                state.counts[key] = n = state.counts.get(key, 0) + 1
                if n > limit:
                    out.append((f"max_calls[{glob!r}]", f"call {n} in this session, at most {limit}"))
        seen = state.preceded.setdefault(source, set())
        for i, rule, _, then in self._order:
            if then.match(name) and i not in seen:
                out.append((f"order[{i}]", f"no earlier call matching {rule.before!r}"))
        seen.update(i for i, _, before, _ in self._order if before.match(name))
        return out

    def _violation(
        self,
        source: str,
        call: ToolCallView,
        rule: str,
        problem: str,
        exchange: ExchangeSummary,
        session: Session,
        state: _State,
    ) -> Violation:
        ident = f" ({call.id})" if call.id else ""
        details: dict[str, Any] = {"tool": call.name, "call_id": call.id, "source": source, "rule": rule}
        if state.injection is not None:
            details["after_injection"] = state.injection.exchange_id
        return self.violation(
            f"{source} tool call {call.name!r}{ident} breaks {rule}: {problem}",
            session,
            exchange,
            cause=state.injection,
            details=details,
        )


def _plants(params: dict[str, Any]) -> bool:
    """A fault that put an instruction where the agent reads it (not a mutation that found no place)."""
    text = params.get("text")
    return isinstance(text, str) and bool(text) and params.get("mutated") is not False


def _arguments(call: ToolCallView) -> dict[str, Any] | None:
    # Arguments that do not parse cannot be checked here; tool_arguments_json reports them.
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _values(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return [v if isinstance(v, str) else json.dumps(v) for v in items]


def _argument_problems(rule: _Arguments, args: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    for name, globs in rule.globs.items():
        if name in args and not all(any(g.match(v) for g in globs) for v in _values(args[name])):
            problems.append(f"argument {name!r} does not match {rule.rule.match[name]!r}")
    for name, rx in rule.regexes.items():
        if name in args and not all(rx.fullmatch(v) for v in _values(args[name])):
            problems.append(f"argument {name!r} does not match regex.{name}")
    if rule.validator is not None and (problem := first_problem(rule.validator, args)) is not None:
        what, path = problem
        problems.append(f"schema: {what} at {path}")
    return problems
