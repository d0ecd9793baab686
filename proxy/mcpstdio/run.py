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
from brownout.proxy.mcpstdio.pipes import Child, exit_code, spawn
from brownout.proxy.mcpstdio.relay import StdioRelay
from brownout.proxy.pipeline import Pipeline

__all__ = ["run_mcp_stdio", "stdio_config"]

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 1.5  # an MCP client gives its server about 2 s after closing stdin before killing it


def stdio_config(config: BrownoutConfig, metrics_listen: str = "") -> BrownoutConfig:
    """The config as mcp-stdio runs it: /metrics only when an address was asked for.

    Raises ValueError when `metrics_listen` asks for /metrics that the config turns off: which of
    the two the user meant is theirs to say, and serving nothing would look like a broken scrape.
    """
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


async def _client_pipes(limit: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """Our stdin and stdout as asyncio streams (they are the client's pipes)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return reader, writer


def _soon(loop: asyncio.AbstractEventLoop, fn: Callable[[Exchange], None], exchange: Exchange) -> None:
    # Spans, invariants and metrics run after the reply is written: never in the agent's latency.
    loop.call_soon(fn, exchange)


def _forward_signals(child: Child) -> None:
    loop = asyncio.get_running_loop()
    seen: set[int] = set()

    def forward(signum: int) -> None:
        # The first signal is the server's to handle; a second one ends it.
        child.signal(signal.SIGKILL if signum in seen else signum)
        seen.add(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, forward, signum)


async def run_mcp_stdio(
    config: BrownoutConfig, command: Sequence[str], *, session: str | None = None, metrics_listen: str = ""
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
    reader, writer = await _client_pipes(limit)
    loop = asyncio.get_running_loop()
    relay = StdioRelay(
        child=child,
        client_out=writer,
        engine=engine,
        complete=lambda ex: _soon(loop, pipeline.complete, ex),
        wire=config.catalogue.wire.by_provider("mcp"),
        guard=guard,
        session=session or os.environ.get("BROWNOUT_SESSION") or f"mcp-stdio:{child.label}",
        capture_max_bytes=config.proxy.capture_max_bytes,
    )
    _forward_signals(child)
    server = asyncio.create_task(relay.from_server())
    client = asyncio.create_task(relay.from_client(reader))
    await asyncio.wait({server, client}, return_when=asyncio.FIRST_COMPLETED)
    # The client closed our stdin (the server's closes too), or the server closed its stdout (it
    # exited, or it can no longer answer): either way the server stops, gently first.
    returncode = await child.stop()
    await server
    client.cancel()
    await relay.settle(timeout_s=0.5)
    with contextlib.suppress(ConnectionError, RuntimeError):
        writer.close()
    message = child.describe_exit()
    if child.killed_by or returncode != 0:
        print(f"brownout: {message}", file=sys.stderr)
    else:
        log.info("brownout: %s", message)
    await asyncio.sleep(0)  # the completions queued with call_soon run before the flush
    await loop.run_in_executor(None, pipeline.shutdown, FLUSH_TIMEOUT_S)
    return exit_code(returncode)
