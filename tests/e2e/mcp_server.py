"""A real MCP server (the official SDK's MCPServer, streamable HTTP on uvicorn) in a background thread."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from tests.e2e.mcp_stdio_server import Weather  # typed: the tool declares an outputSchema

__all__ = ["serve", "weather_server"]


def _server() -> MCPServer:
    server = MCPServer("weather")

    @server.tool()
    def get_weather(city: str) -> Weather:
        """Current weather for a city."""
        return {"city": city, "temp_c": 18}

    @server.tool()
    def flaky_forecast(city: str) -> str:
        """A tool whose backend is down: the SDK turns the ToolError into a result with isError."""
        raise ToolError(f"forecast backend for {city} is down")

    return server


@contextlib.contextmanager
def weather_server() -> Iterator[str]:
    """Serve the weather MCP server on an ephemeral loopback port; yields its endpoint URL."""
    with serve(_server()) as url:
        yield url


@contextlib.contextmanager
def serve(server: MCPServer) -> Iterator[str]:
    """`server` over streamable HTTP on an ephemeral loopback port, in a thread; yields its endpoint URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    app = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))
    thread = threading.Thread(target=app.run, kwargs={"sockets": [sock]}, name="mcp-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not app.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the MCP server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        app.should_exit = True
        thread.join(timeout=10)
        sock.close()
