"""A call's time budget that blames the store, not the proxy's own busy loop.

`asyncio.timeout` cancels at the deadline even when the reply is already in: a loop that was busy
for longer than the budget (a saturated proxy on a busy machine) sees the socket ready and the
deadline past in the same turn, runs the reader and the timer in that turn, and the timer cancels
the call before its task could take the reply. The store answered in time; the proxy was late to
look. `within` cancels one turn later instead: a reply that was there when the loop looked again
is taken, and a call still waiting then has failed. A dead or slow store is cut as before, at the
budget plus one turn of the loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

__all__ = ["within"]


async def within[T](work: Awaitable[T], timeout_s: float) -> T:
    """`await work`, cancelled (TimeoutError) if still waiting one loop turn after `timeout_s` seconds."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    state = {"done": False, "cut": False}

    def cut() -> None:
        if not state["done"]:
            state["cut"] = True
            task.cancel()

    # The timer only queues the cut: what the loop read in the same turn reaches its task first.
    timer = loop.call_later(timeout_s, loop.call_soon, cut)
    try:
        return await work
    except asyncio.CancelledError:
        if state["cut"] and task.uncancel() == 0:
            raise TimeoutError from None
        raise
    finally:
        state["done"] = True
        timer.cancel()
