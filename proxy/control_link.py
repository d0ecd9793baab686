"""Connects the control API to a running addon: the kill switch, reload, rule toggles, violations, exchanges."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from brownout.proxy.control import ControlServer
from brownout.proxy.control_experiment import experiment_route
from brownout.proxy.control_target import EngineControl

__all__ = ["start_control"]

log = logging.getLogger(__name__)


def _task_count(loop: asyncio.AbstractEventLoop) -> int | None:
    """Tasks alive on the proxy's loop: the soak run watches this for leaks (read from our thread)."""
    for _ in range(3):
        try:
            return len(asyncio.all_tasks(loop))
        except RuntimeError:  # the loop's task set changed while we copied it: try again
            continue
    return None


def start_control(addon: Any) -> ControlServer | None:
    """Start the control API for `addon` when the config enables it; None otherwise.

    Requests are served on the control server's threads; everything that changes the proxy goes
    through `addon.on_loop` (a reload parses the file on the request's thread first)."""
    config = addon.config.control
    if not config.enabled:
        return None
    loop = addon.on_loop.loop
    target = EngineControl(
        addon.engine,
        reload=addon.reload,  # the file of this proxy, not of whichever one in the process started last
        violations=lambda since: addon.pipeline.exporters.recent_violations(since),
        exchanges=lambda since, limit: addon.pipeline.exporters.recent_exchanges(since, limit),
        extra_status=lambda: {
            "sessions_active": addon.pipeline.sessions_active,
            "internal_errors": addon.guard.snapshot(),
            "in_flight": addon.in_flight,
            "client_connections": addon.limits.snapshot(),
            "tasks": _task_count(loop),
            "state": addon.fleet.status_from_thread() if addon.fleet is not None else {"backend": "memory"},
            "experiment": addon.overlay.describe() if addon.overlay is not None else None,
        },
        run_on_loop=addon.on_loop.call,
        publish=lambda switches: addon.fleet.publish_from_thread(switches) if addon.fleet is not None else {},
    )
    server = ControlServer.from_config(
        config,
        target,
        on_error=lambda e: addon.guard.failed("control", e),
        routes=(experiment_route(lambda: addon.overlay),),
    )
    try:
        return server.start()
    except OSError as e:
        # Asked for and not there: `brownout ctl` would reach whatever holds the port, so do not start.
        raise OSError(e.errno, f"cannot serve the control API on {config.listen}: {e.strerror or e}") from e
