"""Per-flow state the addon keeps between a flow's hooks."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from brownout.core.exchange import Exchange
from brownout.core.wire.base import WireFormat
from brownout.faults.base import StreamTiming
from brownout.faults.plan import Plan
from brownout.proxy.streaming import StreamTap

__all__ = ["FlowState"]


@dataclass(slots=True)
class FlowState:
    """Per-flow state, keyed by flow.id (never in flow.metadata, which is deep-copied)."""

    exchange: Exchange
    wire: WireFormat
    plan: Plan | None = None  # None when no rule fired
    timing: StreamTiming | None = None
    relay_token: str | None = None
    tap: StreamTap | None = None
    deciding: asyncio.Task[bool] | None = None  # a fleet's store deciding the plan while the request travels
    extra: dict[str, Any] = field(default_factory=dict)
