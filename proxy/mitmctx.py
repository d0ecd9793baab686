"""mitmproxy's `ctx` per event loop, so two brownout proxies in one process stay two proxies.

mitmproxy keeps its current master and options in module globals (`mitmproxy.ctx.master`,
`.options`), set by every `Master.__init__` and read while traffic flows: each accepted connection
is handed to `ctx.master`. With two proxies running at once, the one created last would handle the
connections of both, with its own config and plugins. brownout runs each embedded proxy on an event
loop of its own (`running_proxy` starts a thread and a loop per proxy), so after `install()` these
names resolve to the values set on the loop that is running: each proxy's connections reach its own
master. Where no loop runs, or the running loop set nothing (mitmproxy's test helpers, scripts), the
value set last answers, exactly as in mitmproxy.

Two proxies on one loop (two `running_proxy_async` blocks in one `asyncio.run`) still share; the
embedding code warns about that case (`running_master`).
"""

from __future__ import annotations

import asyncio
import sys
import types
from typing import Any

from mitmproxy import ctx as _mitm_ctx

__all__ = ["install", "running_master"]

NAMES = ("master", "options", "log")
_SLOT = "_brownout_mitmproxy_ctx"  # on the loop object: freed with it


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _loop_values(loop: asyncio.AbstractEventLoop | None) -> dict[str, Any] | None:
    return None if loop is None else getattr(loop, _SLOT, None)


class _LastSet:
    """The process-wide values: what mitmproxy's globals would hold (the value set last)."""

    values: dict[str, Any] = {}  # noqa: RUF012 - one per process on purpose: this *is* mitmproxy's global
    master_loop: asyncio.AbstractEventLoop | None = None


def _get(name: str) -> Any:
    values = _loop_values(_running_loop())
    if values is not None and name in values:
        return values[name]
    try:
        return _LastSet.values[name]
    except KeyError:
        raise AttributeError(f"module 'mitmproxy.ctx' has no attribute {name!r}") from None


def _set(name: str, value: Any) -> None:
    _LastSet.values[name] = value
    if name == "master":
        # Master.__init__ sets master, then log and options, on the loop the master will run on.
        _LastSet.master_loop = getattr(value, "event_loop", None) or _running_loop()
    loop = _running_loop() or _LastSet.master_loop
    if loop is None:
        return
    values = _loop_values(loop)
    if values is None:
        values = {}
        try:
            setattr(loop, _SLOT, values)
        except AttributeError:  # a loop without a __dict__: the process-wide value serves it
            return
    values[name] = value


def _accessor(name: str) -> property:
    return property(lambda self: _get(name), lambda self, value: _set(name, value))


class _PerLoopCtx(types.ModuleType):
    """The class `mitmproxy.ctx` takes on: its three names looked up per running loop."""

    master = _accessor("master")
    options = _accessor("options")
    log = _accessor("log")


def install() -> None:
    """Make `mitmproxy.ctx` per loop (idempotent). Values already set become the process-wide ones."""
    module = sys.modules[_mitm_ctx.__name__]
    if isinstance(module, _PerLoopCtx):
        return
    for name in NAMES:
        if name in module.__dict__:
            _LastSet.values[name] = module.__dict__.pop(name)
    module.__class__ = _PerLoopCtx


def running_master(loop: asyncio.AbstractEventLoop) -> Any | None:
    """The master set on `loop` if it still runs (its shutdown not begun), else None."""
    values = _loop_values(loop)
    master = None if values is None else values.get("master")
    if master is None or not loop.is_running() or master.should_exit.is_set():
        return None
    return master
