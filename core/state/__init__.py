"""Shared state: what must hold across brownout processes (replicas, workers) and where it lives.

`memory` (the default) keeps everything in the process, as a single brownout always has; `redis`
keeps it in a Redis server that every replica and worker points at (Envoy's global rate limit
does the same). `StateConfig` is the config section; `RedisLink` is one process's connection to
the store, through which every Redis call goes: each call has a time budget, and a failure is
counted and answered with the caller's fallback, never raised into traffic.
"""

from brownout.core.state.config import StateConfig
from brownout.core.state.link import RedisLink

__all__ = ["RedisLink", "StateConfig"]
