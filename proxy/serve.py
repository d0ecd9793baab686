"""`brownout run` in the foreground: serve until a signal, then drain in-flight exchanges."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import Any

from brownout.proxy import heap
from brownout.proxy.connkill import close_clients
from brownout.proxy.embed import ProxyHandle, running_proxy_async
from brownout.proxy.idlework import IdleWork

__all__ = ["drain", "serve_until_signal", "settle_heap"]

logger = logging.getLogger(__name__)


async def serve_until_signal(
    on_ready: Callable[[ProxyHandle], None], *, drain_s: float | None = None, **kwargs: Any
) -> None:
    """Run brownout on this loop (mitmproxy's log on the terminal at warn level) until SIGINT or SIGTERM.

    The first signal drains for `drain_s` (default: the config's `proxy.drain_timeout_s`, see
    `drain`); a second one stops at once. Either way every exchange still in flight is recorded.
    """
    async with running_proxy_async(with_termlog=True, **kwargs) as handle:
        loop = asyncio.get_running_loop()
        stop, force = asyncio.Event(), asyncio.Event()

        def on_signal() -> None:
            (force if stop.is_set() else stop).set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        idle_gc: heap.IdleCollections | None = None
        try:
            on_ready(handle)
            # The price table (tens of thousands of objects) loads on a thread at start: frozen with the rest.
            await asyncio.to_thread(handle.addon.pipeline.prices_loaded.wait, 10.0)
            settle_heap()
            handle.addon.heap_owned = True  # hot reloads keep the heap settled too
            idle_gc = _collect_when_idle(loop)
            waits = [asyncio.create_task(stop.wait()), asyncio.create_task(handle.master.should_exit.wait())]
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for t in pending:
                t.cancel()
            if stop.is_set():
                timeout_s = handle.addon.config.proxy.drain_timeout_s if drain_s is None else drain_s
                await drain(handle, timeout_s=timeout_s, force=force)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
            if idle_gc is not None:
                idle_gc.stop()
                work = IdleWork.of(loop)
                if work is not None:
                    work.collect_when_idle(None)


def _collect_when_idle(loop: asyncio.AbstractEventLoop) -> heap.IdleCollections | None:
    """The process is brownout's own: the collector's passes wait for the loop's idle moments (proxy/heap.py)."""
    work = IdleWork.of(loop)
    if work is None or not heap.IdleCollections.supported():
        return None
    idle_gc = heap.IdleCollections()
    idle_gc.start()
    work.collect_when_idle(idle_gc)
    return idle_gc


def settle_heap() -> None:
    """Move everything start-up created (mitmproxy, the SDKs, the config) out of the collector's reach.

    A full collection otherwise walks that whole heap again and again while traffic flows: tens
    of milliseconds each time, every few seconds under load, straight into the latency tail
    (measured with bench/run.py: p99 of all-on brownout). Only `brownout run` does this: the
    process is brownout's own; an application embedding the proxy keeps its own GC policy.
    """
    heap.settle()


async def drain(handle: ProxyHandle, *, timeout_s: float, force: asyncio.Event | None = None) -> int:
    """Stop accepting connections, wait (bounded) for in-flight exchanges, then cut the rest; returns
    how many were cut.

    Without this, leaving the loop cancels every connection task: a stream in flight at SIGTERM
    would be cut and its exchange never reach the span and violation exporters. What is still in
    flight at the deadline (or when `force` is set) is recorded as cut by shutdown first, then its
    connection is closed, so the client sees the cut at once and the logs close with every record.
    """
    with contextlib.suppress(Exception):  # a listener that fails to close must not block shutdown
        await handle.master.addons.get("proxyserver").servers.update([])
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while handle.addon.in_flight and loop.time() < deadline and not (force is not None and force.is_set()):
        await asyncio.sleep(0.02)
    await asyncio.sleep(0)  # finished exchanges hand themselves to the pipeline (Pipeline.stop completes them)
    left = handle.addon.cut_in_flight()
    if left:
        waited = "a second signal" if force is not None and force.is_set() else f"{timeout_s:g} s"
        logger.warning(
            "brownout: cut %d exchanges still in flight after %s (recorded as error.type shutdown)", left, waited
        )
    close_clients(handle.master.addons.get("proxyserver"), "brownout shutdown")
    return left
