"""Stand-ins for the engine tests: a fake clock, sleep and wire, two test-only fault types
(known to the rule sets built here, as a config's plugins would be), and builders for rule
sets, engines and exchanges."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal

from pydantic import TypeAdapter

from brownout import faults
from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.registry import build_registry
from brownout.core.wire.base import RequestInfo, StreamEvent, StreamParser, WireFormat
from brownout.core.wire.framing import SSEFramer
from brownout.faults.base import CLOSE, Fault, FaultContext, FaultParams, StreamEditor, StreamTiming
from brownout.faults.config import Rules
from brownout.faults.engine import FaultEngine, RuleSet

T0 = 1_700_000_000.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, s: float) -> None:
        self.calls.append(s)


class Wire(WireFormat):
    """Just enough provider: an error_response whose bytes show what was asked."""

    provider = "openai"

    def recognise(self, req: RequestInfo) -> str | None:
        return None

    def parse_request(self, exchange: Exchange, body: bytes) -> None:
        pass

    def parse_response(self, exchange: Exchange, body: bytes) -> None:
        pass

    def stream_parser(self, exchange: Exchange) -> StreamParser:
        raise NotImplementedError

    def error_response(
        self,
        status: int,
        error_type: str | None = None,
        message: str | None = None,
        retry_after_s: float | None = None,
        exchange: Exchange | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {"content-type": "application/json"}
        if retry_after_s is not None:
            headers["retry-after"] = str(retry_after_s)
        return status, headers, json.dumps({"error": {"type": error_type, "code": status}}).encode()


# Stand-in faults: behaviour the tests control, registered only for this module's tests.
class TagParams(FaultParams):
    type: Literal["tag"]
    text: str = "!"
    close_after: int | None = None


class TagFault(Fault):
    """Appends text to requests, bodies and stream events; records a random number from its RNG."""

    type = "tag"
    Params = TagParams
    params: TagParams

    async def before_upstream(self, ctx: FaultContext) -> None:
        ctx.extra["roll"] = ctx.rng.random()

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        return body + self.params.text.encode()

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        return body + self.params.text.encode()

    def stream_editor(self, ctx: FaultContext) -> StreamEditor:
        return _TagEditor(self.params)


class _TagEditor(StreamEditor):
    def __init__(self, p: TagParams) -> None:
        self.p, self.n = p, 0

    def on_event(self, event: StreamEvent) -> list[bytes] | str:
        self.n += 1
        if self.p.close_after is not None and self.n > self.p.close_after:
            return CLOSE
        return [f"data: {event.data}{self.p.text}\n\n".encode()]

    def on_end(self) -> list[bytes]:
        return [f"data: end{self.p.text}\n\n".encode()]


class BoomParams(FaultParams):
    type: Literal["boom"]


class BoomFault(Fault):
    """Raises in every phase."""

    type = "boom"
    Params = BoomParams

    async def before_upstream(self, ctx: FaultContext) -> None:
        raise RuntimeError("boom")

    async def on_response_headers(self, ctx: FaultContext, headers: dict[str, str]) -> None:
        raise RuntimeError("boom")

    def edit_request(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        raise RuntimeError("boom")

    def wants_body(self, ctx: FaultContext) -> bool:
        raise RuntimeError("boom")

    def edit_body(self, ctx: FaultContext, body: bytes, headers: dict[str, str]) -> bytes:
        raise RuntimeError("boom")

    def stream_editor(self, ctx: FaultContext) -> StreamEditor:
        class Bad(StreamEditor):
            def on_event(self, event: StreamEvent) -> list[bytes] | str:
                raise RuntimeError("boom")

        return Bad()

    def stream_timing(self, ctx: FaultContext) -> StreamTiming:
        raise RuntimeError("boom")


TYPES = build_registry("fault", [*faults.FAULTS, TagFault, BoomFault], "Params")
_RULES: TypeAdapter[Any] = TypeAdapter(Rules)


def config(*rules: dict[str, Any], seed: int = 42) -> RuleSet:
    """The rule set of these rules, validated as a config with the stand-in faults would be."""
    validated = _RULES.validate_python(list(rules), context={"fault_types": TYPES})
    return RuleSet(rules=validated, seed=seed, fault_types=TYPES)


def engine(*rules: dict[str, Any], seed: int = 42, **kw: Any) -> FaultEngine:
    kw.setdefault("clock", Clock())
    kw.setdefault("sleep", Sleeps())
    kw.setdefault("guard", Guard(strict=True))  # a fault bug fails the test; containment tests pass their own
    return FaultEngine(config(*rules, seed=seed), **kw)


def ex(i: int = 0, session: str = "s1", **kw: Any) -> Exchange:
    base: dict[str, Any] = {
        "provider": "openai",
        "operation": "chat",
        "path": "/v1/chat/completions",
        "model": "gpt-4o",
    }
    base.update(kw)
    return Exchange(id=f"{session}-{i}", session=session, **base)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


WIRE = Wire()


def openai_events(*tools: str) -> list[StreamEvent]:
    """A streamed chat completion: some text, then a call of each tool, its name and arguments in two events."""
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"content": "Let me check."}}]}]
    for i, name in enumerate(tools):
        call = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": ""}}
        args = {"index": i, "function": {"arguments": '{"to": "a@b.c"}'}}
        chunks += [{"choices": [{"index": 0, "delta": {"tool_calls": [c]}}]} for c in (call, args)]
    return SSEFramer().feed(b"".join(b"data: %s\n\n" % json.dumps(c).encode() for c in chunks))
