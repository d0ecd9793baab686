"""Session invariants across a fleet: the shared session store, built from `state:` when it is Redis.

With `state.backend: redis` the invariant checks of each exchange read and commit the session in
the fleet's store (invariants/fleet.py), as async jobs after the response, one session at a time
per process (proxy/checkqueue.py). With `memory` nothing here is built: the checks stay in process,
synchronous, at today's cost.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from brownout.core.state.redis_sessions import RedisSessions
from brownout.invariants.fleet import FleetChecks
from brownout.invariants.runner import InvariantRunner
from brownout.invariants.session import HISTORY_MAX
from brownout.proxy.checkqueue import OrderedJobs

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["MAX_QUEUED", "MAX_RUNNING", "FleetSessions"]

log = logging.getLogger(__name__)

MAX_RUNNING = 64  # sessions whose checks are in flight at once
MAX_QUEUED = 10_000  # exchanges waiting for their checks; more are exported unchecked, and counted


class FleetSessions:
    """The shared-session checks of one proxy: the store, the checks on it, and the queue that orders them."""

    def __init__(
        self,
        runner: InvariantRunner,
        link: RedisLink,
        *,
        idle_s: float,
        max_running: int = MAX_RUNNING,
        max_queued: int = MAX_QUEUED,
    ) -> None:
        self.link = link
        states = RedisSessions(link, idle_s=idle_s, max_sessions=runner.sessions.max_sessions, history_max=HISTORY_MAX)
        self.checks = FleetChecks(runner, states)
        self.jobs = OrderedJobs(max_running=max_running, max_queued=max_queued)
        log.info("session invariants share their sessions in the state store %s", link.where)

    async def close(self, timeout_s: float) -> int:
        """Let the queued checks finish (at most timeout_s), then close the link; how many were left unchecked."""
        left = await self.jobs.join(timeout_s)
        if left:
            log.warning("brownout: %d exchanges left without their invariant checks at shutdown", left)
        await self.link.close()
        return left
