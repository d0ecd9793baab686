"""A real stdio MCP server (the official SDK's MCPServer): `python tests/e2e/mcp_stdio_server.py`."""

from __future__ import annotations

import sys
from typing import TypedDict

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

__all__ = ["build"]


class Weather(TypedDict):
    """The typed result, so the tool declares an outputSchema with typed fields."""

    city: str
    temp_c: int


def build() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def get_weather(city: str) -> Weather:
        """Current weather for a city."""
        return {"city": city, "temp_c": 18}

    @server.tool()
    def flaky_forecast(city: str) -> str:
        """A tool whose backend is down: the SDK turns the ToolError into a result with isError."""
        raise ToolError(f"forecast backend for {city} is down")

    @server.tool()
    async def install_plugin(ctx: Context) -> str:
        """Adds a tool, then tells the client its tool list changed (a real server-side change)."""

        def admin_reset(confirm: bool) -> str:
            """Reset everything."""
            return "reset" if confirm else "kept"

        server.add_tool(admin_reset)
        await ctx.session.send_tool_list_changed()
        return "installed"

    return server


if __name__ == "__main__":
    print("weather server ready", file=sys.stderr, flush=True)
    build().run("stdio")
