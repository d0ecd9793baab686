"""Shared state: what must hold across brownout processes (replicas, workers) and where it lives.

`memory` (the default) keeps everything in the process, as a single brownout always has; `redis`
keeps it in a Redis server that every replica and worker points at (Envoy's global rate limit
does the same). `StateConfig` is the config section; `RedisLink` is one process's connection to
the store, through which every Redis call goes: each call has a time budget, and a failure is
counted and answered with the caller's fallback, never raised into traffic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brownout.core.state.config import StateConfig

if TYPE_CHECKING:
    from brownout.core.state.link import RedisLink

__all__ = ["RedisLink", "StateConfig"]


def __getattr__(name: str) -> Any:
    # The Redis client loads with the first use of the redis backend: a process on the memory backend (the
    # default) never imports it, and starts 0.2 s sooner.
    if name == "RedisLink":
        from brownout.core.state.link import RedisLink

        return RedisLink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
