"""A real MCP server whose tools change at the client's request: MCPServer over streamable HTTP, both eras.

`change_tools` adds a tool and publishes the change the way each era hears of it (the handshake era's
`notifications/tools/list_changed`, and the 2026-07-28 `subscriptions/listen` streams); tools/list
answers carry a `ttlMs` cache hint."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import Context, MCPServer

from tests.e2e.mcp_server import serve
from tests.e2e.mcp_stdio_server import announce_tools_changed

__all__ = ["LIST_TTL_MS", "listen_server"]

LIST_TTL_MS = 1500


def _server() -> MCPServer:
    server = MCPServer("changing", cache_hints={"tools/list": CacheHint(ttl_ms=LIST_TTL_MS)})

    @server.tool()
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        return f"Sunny in {city}"

    @server.tool()
    async def change_tools(ctx: Context) -> str:
        """Adds a tool and announces that the tool list changed."""

        def admin_reset(confirm: bool) -> str:
            """Reset everything."""
            return "reset" if confirm else "kept"

        server.add_tool(admin_reset)
        await announce_tools_changed(ctx)
        return "changed"

    return server


@contextlib.contextmanager
def listen_server() -> Iterator[str]:
    """Serve it on an ephemeral loopback port; yields its endpoint URL."""
    with serve(_server()) as url:
        yield url
