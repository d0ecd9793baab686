"""`brownout mcp-stdio`: start the relay, wire it to the fault engine and pipeline, exit with the server.

The same pieces as the HTTP proxy: the config's catalogue and rules, `FaultEngine`, `Pipeline`
(spans, invariants, exporters) and one `Guard`. What a pipe does not need stays off: the control
API, hot reload, and /metrics unless asked for (an agent starts one mcp-stdio per server, and one
port cannot serve them all: `--metrics-listen`, or `exporters.prometheus.listen` set in the file).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence

from mitmproxy.utils import human

from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.faults.engine import FaultEngine
from brownout.proxy.config import BrownoutConfig, with_listen_overrides
from brownout.proxy.mcpstdio.clientio import (
    CLIENT_WRITE_TIMEOUT_S,
    FILE_REPLIES_TIMEOUT_S,
    ClientIOError,
    client_streams,
)
from brownout.proxy.mcpstdio.pipes import Child, exit_code, spawn
from brownout.proxy.mcpstdio.relay import StdioRelay
from brownout.proxy.pipeline import Pipeline

__all__ = ["run_mcp_stdio", "stdio_config"]

log = logging.getLogger(__name__)

STDOUT_DRAIN_S = 2.0  # after the server's group has ended, its last lines have this long to arrive
FLUSH_TIMEOUT_S = 1.5  # an MCP client gives its server about 2 s after closing stdin before killing it


def stdio_config(config: BrownoutConfig, metrics_listen: str = "") -> BrownoutConfig:
    """The config as mcp-stdio runs it: /metrics only when an address was asked for.

    Raises ValueError when `metrics_listen` asks for /metrics that the config turns off: which of
    the two the user meant is theirs to say, and serving nothing would look like a broken scrape; and
    for a rule whose fault cannot act on a pipe (no sessions, no headers), which would never fire.
    """
    types = config.ruleset.fault_types
    for rule in config.rules:
        reason = types[rule.fault_type].stdio_refused if rule.fault_type in types else None
        if reason is not None and rule.enabled:
            raise ValueError(f"rule {rule.name!r}: {rule.fault_type} cannot act on a stdio MCP server: {reason}")
    prom = config.exporters.prometheus
    if metrics_listen and not prom.enabled:
        raise ValueError(
            f"--metrics-listen {metrics_listen} asks for /metrics, but the config turns it off "
            "(exporters.prometheus.enabled: false): drop one of the two"
        )
    if metrics_listen:
        return with_listen_overrides(config, metrics_listen)
    if "listen" in prom.model_fields_set or not prom.enabled:
        return config
    off = config.exporters.model_copy(update={"prometheus": prom.model_copy(update={"enabled": False})})
    return config.model_copy(update={"exporters": off})


def _soon(loop: asyncio.AbstractEventLoop, fn: Callable[[Exchange], None], exchange: Exchange) -> None:
    # Spans, invariants and metrics run after the reply is written: never in the agent's latency.
    loop.call_soon(fn, exchange)


def _forward_signals(child: Child) -> asyncio.Event:
    """SIGINT and SIGTERM go to the server's group; the returned event asks the relay to stop."""
    loop = asyncio.get_running_loop()
    seen: set[int] = set()
    stopping = asyncio.Event()

    def forward(signum: int) -> None:
        # The first signal is the server's to handle, within the shutdown sequence's bounds (a server
        # that ignores it is ended all the same); a second one ends it at once.
        child.signal(signal.SIGKILL if signum in seen else signum)
        seen.add(signum)
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, forward, signum)
    return stopping


async def run_mcp_stdio(
    config: BrownoutConfig,
    command: Sequence[str],
    *,
    session: str | None = None,
    metrics_listen: str = "",
    client_write_timeout_s: float = CLIENT_WRITE_TIMEOUT_S,
) -> int:
    """Relay stdio between our client and `command` until either side ends; returns the exit status."""
    try:
        config = stdio_config(config, metrics_listen)
    except ValueError as e:
        print(f"brownout: {e}", file=sys.stderr)
        return 1
    guard = Guard()
    pipeline = Pipeline(config, guard)
    engine = FaultEngine(config.ruleset, guard=guard)
    engine.decisions.add_sink(pipeline.exporters.on_decision)
    limit = human.parse_size(config.proxy.buffer_max_bytes) or 32 << 20
    try:  # before the server starts: a stdin or stdout that cannot serve fails at once, leaving nothing behind
        reader, client_out, feeding = await client_streams(limit, stdin=sys.stdin, stdout=sys.stdout)
    except ClientIOError as e:
        print(f"brownout: {e}", file=sys.stderr)
        return 1
    try:
        child = await spawn(command, limit=limit)
    except OSError as e:
        print(f"brownout: cannot run {command[0]!r}: {e.strerror or e}", file=sys.stderr)
        return 127 if isinstance(e, FileNotFoundError) else 126
    try:
        pipeline.start(rules=engine.active_rules)
    except OSError as e:
        print(f"brownout: {e}", file=sys.stderr)
        child.kill("startup")
        await child.proc.wait()
        return 1
    loop = asyncio.get_running_loop()
    relay = StdioRelay(
        child=child,
        client_out=client_out,
        engine=engine,
        complete=lambda ex: _soon(loop, pipeline.complete, ex),
        wire=config.catalogue.wire.by_provider("mcp"),
        guard=guard,
        session=session or os.environ.get("BROWNOUT_SESSION") or f"mcp-stdio:{child.label}",
        capture_max_bytes=config.proxy.capture_max_bytes,
        client_write_timeout_s=client_write_timeout_s,
    )
    stopping = asyncio.create_task(_forward_signals(child).wait())
    server = asyncio.create_task(relay.from_server())
    client = asyncio.create_task(relay.from_client(reader))
    done, _ = await asyncio.wait({server, client, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if client in done and feeding is not None:
        # A regular file on stdin has ended: that is the last request, not the client leaving.
        await relay.answered(FILE_REPLIES_TIMEOUT_S, unless=(server, stopping))
    # The client closed our stdin (the server's closes too), the server closed its stdout (it exited,
    # or it can no longer answer), or we were told to stop: either way the server stops, gently first.
    returncode = await child.stop()
    try:
        await asyncio.wait_for(server, STDOUT_DRAIN_S)
    except TimeoutError:
        # Its whole group has ended: only a process that left the group (a daemon) can hold the pipe.
        log.warning("the MCP server's stdout is still open after it ended: brownout stops reading it")
    client.cancel()
    stopping.cancel()
    if feeding is not None:
        feeding.cancel()
    await relay.settle(timeout_s=0.5)
    with contextlib.suppress(ConnectionError, RuntimeError):
        client_out.close(abort=relay.client_gone is not None)
    if relay.client_gone:
        print(f"brownout: {relay.client_gone}: the server was stopped", file=sys.stderr)
    message = child.describe_exit()
    if child.killed_by or returncode != 0:
        print(f"brownout: {message}", file=sys.stderr)
    else:
        log.info("brownout: %s", message)
    await asyncio.sleep(0)  # the completions queued with call_soon run before the flush
    await loop.run_in_executor(None, pipeline.shutdown, FLUSH_TIMEOUT_S)
    return exit_code(returncode)
