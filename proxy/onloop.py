"""The one way other threads touch a running proxy: run a callable on its event loop and wait.

The control API's server threads, an experiment runner and the pytest plugin live on other
threads than mitmproxy's loop; the addon's state (engine rules, pipeline, listeners) is only
ever changed on the loop, so a change never interleaves with an exchange being handled there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["LoopRunner"]

T = TypeVar("T")


class LoopRunner:
    """Runs callables on one event loop from any thread (directly when already on it)."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        *,
        timeout_s: float = 30.0,
        before: Callable[[], object] = lambda: None,
    ) -> None:
        """`before` runs on the loop ahead of each callable another thread sends (the proxy completes the
        exchanges whose answers were sent, so the callable sees them)."""
        self.loop = loop
        self.timeout_s = timeout_s
        self.before = before

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on the loop; its exception is raised here. Without a running loop, called here."""
        loop = self.loop
        if loop is None or not loop.is_running() or _current_loop() is loop:
            return fn(*args)

        async def run() -> T:
            self.before()
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout=self.timeout_s)


def _current_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
