"""The addon's side of the fault engine: every call contained, so a fault bug never breaks traffic."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.wire.base import WireFormat
from brownout.faults.base import Hang, Reset, Respond, StreamEditor, StreamTiming
from brownout.faults.engine import FaultEngine
from brownout.proxy.config import BrownoutConfig

__all__ = ["EngineLink"]

log = logging.getLogger(__name__)


class EngineLink:
    """Wraps `FaultEngine` and its plans; a failure means "no fault", counted under component "fault"."""

    def __init__(self, config: BrownoutConfig, guard: Guard, *, sleep: Any = asyncio.sleep) -> None:
        self.guard = guard
        self.engine = FaultEngine(config, sleep=sleep, on_error=lambda component, exc: guard.failed(component, exc))

    def reload(self, config: BrownoutConfig) -> None:
        self.engine.reload(config)

    def plan(self, exchange: Exchange, wire: WireFormat) -> Any:
        plan = self.guard.call("engine", self.engine.plan, exchange, wire, context=f"exchange {exchange.id}")
        return None if plan is None or plan.empty else plan

    async def before_upstream(self, plan: Any) -> Respond | Reset | Hang | None:
        try:
            return await plan.before_upstream()
        except Exception as e:
            self.guard.failed("fault", e, "before_upstream")
            return None

    async def on_response_headers(self, plan: Any, status: int, headers: dict[str, str]) -> None:
        try:
            await plan.on_response_headers(status, headers)
        except Exception as e:
            self.guard.failed("fault", e, "on_response_headers")

    def stream_timing(self, plan: Any) -> StreamTiming | None:
        return self.guard.call("fault", plan.stream_timing, context="stream_timing")

    def stream_editor(self, plan: Any) -> StreamEditor | None:
        return self.guard.call("fault", plan.stream_editor, context="stream_editor")

    def wants_body(self, plan: Any) -> bool:
        return bool(self.guard.call("fault", plan.wants_body, default=False, context="wants_body"))

    def edit_body(self, plan: Any, body: bytes, headers: dict[str, str]) -> bytes | None:
        return self.guard.call("fault", plan.edit_body, body, headers, default=body, context="edit_body")

    def finish(self, plan: Any) -> None:
        self.guard.call("fault", plan.finish, context="finish")
