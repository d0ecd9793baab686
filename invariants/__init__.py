"""The invariant catalogue: one module per invariant type, registered here by hand.

Adding an invariant = one module + one line in `INVARIANTS` + tests/invariants/test_<type>.py;
tests/invariants/test_registry.py checks the registry, the config union and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping

from brownout.core.registry import build_registry
from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.call_budget import CallBudget
from brownout.invariants.claimed_success import ClaimedSuccess
from brownout.invariants.cost_budget import CostBudget
from brownout.invariants.custom import Custom
from brownout.invariants.injection_followed import InjectionFollowed
from brownout.invariants.latency_budget import LatencyBudget
from brownout.invariants.mcp_reconnect_discipline import McpReconnectDiscipline
from brownout.invariants.mcp_tools import McpTools
from brownout.invariants.missing_span import MissingSpan
from brownout.invariants.no_loop import NoLoop
from brownout.invariants.no_pii import NoPii
from brownout.invariants.realtime_session_budget import RealtimeSessionBudget
from brownout.invariants.reconnect_discipline import ReconnectDiscipline
from brownout.invariants.retry_discipline import RetryDiscipline
from brownout.invariants.span_mismatch import SpanMismatch
from brownout.invariants.stream_complete import StreamComplete
from brownout.invariants.token_budget import TokenBudget
from brownout.invariants.tool_arguments_json import ToolArgumentsJson
from brownout.invariants.tool_policy import ToolPolicy

__all__ = ["INVARIANTS", "REGISTRY", "create"]

INVARIANTS: tuple[type[Invariant], ...] = (
    LatencyBudget,
    ToolArgumentsJson,
    NoPii,
    NoLoop,
    RetryDiscipline,
    TokenBudget,
    CallBudget,
    CostBudget,
    StreamComplete,
    InjectionFollowed,
    McpTools,
    McpReconnectDiscipline,
    ToolPolicy,
    ReconnectDiscipline,
    RealtimeSessionBudget,
    ClaimedSuccess,
    MissingSpan,
    SpanMismatch,
    Custom,
)

# The built-in types, read-only. A config's plugins add theirs to its own catalogue, never here.
REGISTRY: Mapping[str, type[Invariant]] = build_registry("invariant", INVARIANTS, "Config")


def create(config: InvariantConfigBase, registry: Mapping[str, type[Invariant]] = REGISTRY) -> Invariant:
    """The invariant instance for a validated config."""
    return registry[config.type](config)
