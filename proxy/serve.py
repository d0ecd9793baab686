"""`brownout run` in the foreground: serve until a signal, then drain in-flight exchanges."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from brownout.proxy.embed import ProxyHandle, running_proxy_async

__all__ = ["DRAIN_TIMEOUT_S", "drain", "serve_until_signal"]

logger = logging.getLogger(__name__)

# How long SIGTERM waits for in-flight exchanges (a streamed LLM answer can take a while);
# below Kubernetes' default 30 s grace period, leaving room for the bounded span flush.
DRAIN_TIMEOUT_S = 20.0


async def serve_until_signal(
    on_ready: Callable[[ProxyHandle], None], *, drain_s: float = DRAIN_TIMEOUT_S, **kwargs: Any
) -> None:
    """Run brownout on this loop (mitmproxy's log on the terminal at warn level) until SIGINT or SIGTERM.

    The first signal drains (see `drain`); a second one stops at once.
    """
    async with running_proxy_async(with_termlog=True, **kwargs) as handle:
        loop = asyncio.get_running_loop()
        stop, force = asyncio.Event(), asyncio.Event()

        def on_signal() -> None:
            (force if stop.is_set() else stop).set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            on_ready(handle)
            waits = [asyncio.create_task(stop.wait()), asyncio.create_task(handle.master.should_exit.wait())]
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            if stop.is_set():
                await drain(handle, timeout_s=drain_s, force=force)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)


async def drain(handle: ProxyHandle, *, timeout_s: float = DRAIN_TIMEOUT_S, force: asyncio.Event | None = None) -> int:
    """Stop accepting connections, then wait (bounded) for in-flight exchanges; returns how many were cut.

    Without this, leaving the loop cancels every connection task: a stream in flight at SIGTERM
    would be cut and its exchange never reach the span and violation exporters.
    """
    with contextlib.suppress(Exception):  # a listener that fails to close must not block shutdown
        await handle.master.addons.get("proxyserver").servers.update([])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while handle.addon.in_flight and loop.time() < deadline and not (force is not None and force.is_set()):
        await asyncio.sleep(0.02)
    left = int(handle.addon.in_flight)
    if left:
        logger.warning("brownout: shutting down with %d exchanges still in flight after %.1f s", left, timeout_s)
    await asyncio.sleep(0)  # finished exchanges hand themselves to the pipeline with call_soon
    return left
