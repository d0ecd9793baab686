"""A task that starts on the loop's next turn, never inside the call that creates it.

mitmproxy runs its loop with an eager task factory: `create_task` runs the new task up to its first
real wait before returning. Work started from an exchange's hooks (its invariant checks on a shared
store, the release of its shared leases) would then do its first steps, a Redis command written to
the socket among them, before the hook returns, that is before the agent gets its response. Started
lazily, it runs once the loop has written the response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

__all__ = ["start_later"]


def start_later[T](coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
    """`coro` as a task of the running loop, its first step scheduled (not run) now, whatever the task factory."""
    return asyncio.Task(coro, loop=asyncio.get_running_loop(), name=name, eager_start=False)
