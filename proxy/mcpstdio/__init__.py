"""`brownout mcp-stdio`: chaos between an MCP client and a stdio MCP server it starts."""

from brownout.proxy.mcpstdio.run import run_mcp_stdio

__all__ = ["run_mcp_stdio"]
