"""The `brownout mcp-stdio` command."""

from __future__ import annotations

import asyncio
import logging
import sys

import click

from brownout.proxy.mcpstdio.clientio import CLIENT_WRITE_TIMEOUT_S

__all__ = ["mcp_stdio"]


@click.command("mcp-stdio", context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("-c", "--config", "config_path", type=click.Path(dir_okay=False), help="Chaos config (YAML).")
@click.option("--session", default=None, help="Session name (default: $BROWNOUT_SESSION, else mcp-stdio:<server>).")
@click.option(
    "--metrics-listen", default="", metavar="HOST:PORT", help="Serve /metrics here (off unless given or configured)."
)
@click.option(
    "--client-write-timeout-s",
    type=click.FloatRange(min=0, min_open=True),
    default=CLIENT_WRITE_TIMEOUT_S,
    show_default=True,
    help="A client that reads none of its replies for this long counts as gone: the server is stopped.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def mcp_stdio(
    config_path: str | None,
    session: str | None,
    metrics_listen: str,
    client_write_timeout_s: float,
    command: tuple[str, ...],
) -> None:
    """Run a stdio MCP server (COMMAND) as a child, with chaos between it and the client on this stdio.

    In an MCP client's configuration, only the command changes:
    "command": "brownout", "args": ["mcp-stdio", "-c", "chaos.yaml", "--", "npx", "server"].
    The server's stderr passes through; brownout exits with the server's status.
    """
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.configload import ConfigError, load_config
    from brownout.proxy.mcpstdio.run import run_mcp_stdio

    try:
        config = load_config(config_path) if config_path else BrownoutConfig()
    except ConfigError as e:
        click.echo(f"brownout: {e}", err=True)
        sys.exit(1)
    # stdout is the MCP client's: everything brownout says goes to stderr.
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="brownout: %(levelname)s %(name)s: %(message)s"
    )
    run = run_mcp_stdio(
        config,
        command,
        session=session,
        metrics_listen=metrics_listen,
        client_write_timeout_s=client_write_timeout_s,
    )
    sys.exit(asyncio.run(run))
