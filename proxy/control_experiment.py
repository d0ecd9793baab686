"""The control API's experiment endpoint: a staging experiment's phase, switched on and off by its runner.

`POST /experiment/phase` applies a phase (the same `id` again renews its lease; with `?renew=1` only
renews it, 410 when it is no longer applied: a phase someone removed stays removed), `DELETE
/experiment/phase[?owner=RUN]` removes it, `GET /experiment/phase` says what is applied here and,
with a fleet on Redis, which replicas acknowledged it. With a fleet on Redis a write reaches every
replica through the store, as the kill switch does; without one it holds for this process only.
See proxy/overlay.py for the lease.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from brownout.proxy.control import Route
from brownout.proxy.overlay import Conflict, PhaseOverlay

__all__ = ["PATH", "experiment_route"]

log = logging.getLogger(__name__)

PATH = "/experiment/phase"
TIMEOUT_S = 10.0


def _on_loop[T](overlay: PhaseOverlay, coro: Coroutine[Any, Any, T]) -> T:
    loop = overlay.loop
    if loop is None:
        coro.close()
        raise RuntimeError("the proxy's loop is not running")
    return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=TIMEOUT_S)


def experiment_route(overlay: Callable[[], PhaseOverlay | None]) -> Route:
    """The route, over the proxy's phase holder (None until the proxy runs)."""

    def route(
        method: str, path: str, query: Mapping[str, list[str]], body: Callable[[], Any]
    ) -> tuple[int, Any] | None:
        if path != PATH:
            return None
        holder = overlay()
        if holder is None:
            return 503, {"error": "the proxy is not running yet"}
        try:
            if method == "GET":
                return 200, _on_loop(holder, holder.fleet_view())
            if method == "POST":
                raw = body()
                if not isinstance(raw, dict):
                    return 400, {"error": "body must be a JSON object: a phase (owner, id, experiment, phase, ...)"}
                try:
                    if query.get("renew", [""])[0] in ("1", "true"):
                        if _on_loop(holder, holder.renew(raw)):
                            return 200, {"renewed": True}
                        return 410, {"error": "the phase is not applied any more (removed, or its lease ran out)"}
                    return 200, _on_loop(holder, holder.put(raw))
                except ValueError as e:
                    return 422, {"error": str(e)}
            if method == "DELETE":
                owner = query.get("owner", [""])[0]
                return 200, _on_loop(holder, holder.remove(owner))
        except Conflict as e:
            return 409, {"error": str(e)}
        return 405, {"error": f"{method} not allowed on {PATH}"}

    return route
