"""The bounded label vocabulary of brownout's metrics: operations, components, reasons, buckets.

A label value outside these sets becomes `other` / `_OTHER` (see Metrics), so a hostile or buggy
client cannot blow up the series count.
"""

from __future__ import annotations

from brownout.core.exchange import Exchange
from brownout.core.span_attributes import error_type

__all__ = [
    "ADMISSION_WAIT_BUCKETS",
    "CLIENT_CUT_REASONS",
    "COMPONENTS",
    "DURATION_BUCKETS",
    "GENAI_DURATION_BUCKETS",
    "GENAI_TOKEN_BUCKETS",
    "MCP_DURATION_BUCKETS",
    "MCP_METHODS",
    "OPERATIONS",
    "STATUS_CLASSES",
    "TTFC_BUCKETS",
    "mcp_code_label",
    "mcp_error_label",
]

# The MCP semantic conventions' well-known mcp.method.name values, and the 2026-07-28 revision's own
# (discover, listen and its acknowledgment): a bounded label set.
MCP_METHODS = frozenset(
    {
        "completion/complete",
        "server/discover",
        "subscriptions/listen",
        "notifications/subscriptions/acknowledged",
        "elicitation/create",
        "initialize",
        "logging/setLevel",
        "notifications/cancelled",
        "notifications/initialized",
        "notifications/message",
        "notifications/progress",
        "notifications/prompts/list_changed",
        "notifications/resources/list_changed",
        "notifications/resources/updated",
        "notifications/roots/list_changed",
        "notifications/tools/list_changed",
        "ping",
        "prompts/get",
        "prompts/list",
        "resources/list",
        "resources/read",
        "resources/subscribe",
        "resources/templates/list",
        "resources/unsubscribe",
        "roots/list",
        "sampling/createMessage",
        "tools/call",
        "tools/list",
    }
)
OPERATIONS = MCP_METHODS | frozenset(
    {
        "chat",
        "responses",
        "messages",
        "embeddings",
        "text_completion",
        "completions",
        "generate",
        "generate_content",
        "stream_generate_content",
        "execute_tool",
        "http",
        "server_stream",
        "session_end",
        "jsonrpc_response",
        "jsonrpc_invalid",
        "realtime",
        "realtime_session",
    }
)
# The Guard components brownout itself uses; pre-created so increase() sees the first error.
COMPONENTS = (
    "exchange",
    "wire",
    "engine",
    "cost",
    "fault",
    "spans",
    "invariants",
    "control",
    "exporter:prometheus",
    "exporter:otlp",
    "exporter:jsonl",
)
# Why brownout cut a client connection: the proxy setting that bounds it.
CLIENT_CUT_REASONS = ("request_header_timeout", "client_idle_timeout", "max_client_connections")
STATUS_CLASSES = frozenset({"1xx", "2xx", "3xx", "4xx", "5xx", "error"})
# LLM calls take seconds to minutes; the default buckets stop at 10 s.
# A connection's wait for admission: a loop iteration is a fraction of a millisecond to tens of them.
ADMISSION_WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600)
TTFC_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60)
# OpenTelemetry GenAI semantic conventions' explicit bucket boundaries.
GENAI_DURATION_BUCKETS = tuple(0.01 * 2**i for i in range(14))  # 0.01 .. 81.92
GENAI_TOKEN_BUCKETS = tuple(4**i for i in range(14))  # 1, 4, 16, ... 67108864
# The MCP semantic conventions' explicit bucket boundaries for mcp.client.operation.duration.
MCP_DURATION_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
# JSON-RPC codes a server may send are unbounded: the standard and MCP ones keep their own label (with the
# 2026-07-28 codes, and -32001, the TypeScript SDK servers' "Session not found").
_MCP_ERROR_LABELS = frozenset(
    {"-32700", "-32600", "-32601", "-32602", "-32603", "-32002", "-32000", "-32001", "-32020", "-32021", "-32022"}
    | {"tool_error"}
)


def mcp_code_label(exchange: Exchange) -> str:
    """rpc.response.status_code, bounded like error_type: a known JSON-RPC code, else _OTHER; '' for none."""
    code = exchange.notes.get("jsonrpc_error_code")
    if not isinstance(code, int) or isinstance(code, bool):
        return ""
    return str(code) if str(code) in _MCP_ERROR_LABELS else "_OTHER"


def mcp_error_label(exchange: Exchange) -> str:
    """error.type as on the span, bounded: known JSON-RPC codes, HTTP statuses, transport errors, else _OTHER."""
    err = error_type(exchange)
    if err is None:
        return ""
    if err in _MCP_ERROR_LABELS or err in ("connection", "cancelled") or (err.isdigit() and len(err) == 3):
        return err
    return "_OTHER"
