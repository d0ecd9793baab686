"""This proxy's place in a fleet: the shared-store link, the schedule store and the fleet-wide switches.

`Fleet` is built from `config.state` once per proxy, when it starts (`Fleet.start`, on the proxy's
loop). With `memory` it holds nothing shared: counters stay in the engine and the control API's
switches act on this process, as they always did. With `redis` it owns:

- `link`, the proxy's one `RedisLink` (budgeted calls, counted failures, reconnection by itself);
  everything shared in this proxy goes through it (the session store too);
- `schedules`, the Redis schedule store the fault engine decides counted rules with;
- the switches: a poll every `state.poll_interval_ms` reads the fleet's kill switch and rule toggles
  and applies them here; `publish` (the control API) writes them and applies them here at once. A
  replica that cannot read the store keeps what it last knew (a paused replica never un-pauses on its
  own); a switch set while the store is away is written when it is back;
- the roll call: once a second this replica's id, config hash and pause state go to the store, and
  the fleet's origin (the base of `start_s` windows, and the epoch that keys the counters) comes back.
  A replica that sees another config hash logs it once and sets `brownout_state_config_mismatch`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from brownout.core.guard import Guard
from brownout.core.state.schedule import ScheduleStore
from brownout.core.state.schedule_memory import MemorySchedules
from brownout.core.state.schedule_redis import RedisSchedules
from brownout.core.state.switches import EMPTY_VERSION, FleetView, RedisSwitches, Replica
from brownout.faults.engine import FaultEngine
from brownout.proxy.config import BrownoutConfig

if TYPE_CHECKING:  # the Redis client loads only with the redis backend
    from brownout.core.state.link import RedisLink

__all__ = ["Fleet", "config_hash", "start_fleet"]

log = logging.getLogger(__name__)

HEARTBEAT_S = 1.0
ROLL_CALL_TTL_S = 5.0  # a replica silent this long leaves the roll call
FIRST_SYNC_TIMEOUT_S = 2.0  # start-up waits this long at most for the fleet's switches and origin
PAUSED = "paused"
RULE = "rule:"


def _dump(model: Any) -> Any:
    return model.model_dump(mode="json")


def config_hash(config: BrownoutConfig) -> str:
    """A short hash of what makes replicas' shared counters comparable: rules, seed, invariants, state."""
    state = config.state
    chaos = {
        "seed": config.seed,
        # Each item by its own model: the list's union type would dump a plugin's invariant loosely.
        "rules": [r.model_dump(mode="json") for r in config.rules],
        "invariants": [_dump(i) for i in config.invariants],
        "state": [state.backend, state.key_prefix, state.lease_ttl_s, config.proxy.session_idle_s],
    }
    text = json.dumps(chaos, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _replica_id() -> str:
    # The pod name in Kubernetes; the pid and a random tail tell apart processes of one host.
    return f"{socket.gethostname()}-{os.getpid()}-{os.urandom(2).hex()}"


class Fleet:
    """The shared state of one proxy: memory (nothing shared) or redis."""

    def __init__(
        self,
        config: BrownoutConfig,
        engine: FaultEngine,
        *,
        on_error: Callable[[str], None] | None = None,
        replica: str | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.engine = engine
        self.guard = guard if guard is not None else Guard()
        self.state = config.state
        self.replica = replica or _replica_id()
        self.config_hash = ""  # only a fleet compares configs (hashing thousands of rules takes a while)
        self.link: RedisLink | None = None
        self.schedules: ScheduleStore = MemorySchedules()
        self.switches: RedisSwitches | None = None
        if config.state.backend == "redis":
            from brownout.core.state.link import RedisLink  # the Redis client: only when used

            self.config_hash = config_hash(config)
            self.link = RedisLink(config.state, on_error=on_error)
            self.schedules = self._redis = RedisSchedules(
                self.link, lease_ttl_s=config.state.lease_ttl_s, replica=self.replica
            )
            self.switches = RedisSwitches(self.link)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.version = ""  # the switches' version last applied
        self.known: dict[str, str] = {}  # the switches as last read
        self.origin_ms: str | None = None
        self.replicas: list[Replica] = []
        self.mismatched: set[str] = set()  # other config hashes seen in the roll call (logged once each)
        self._pending: dict[str, str] = {}  # switches set while the store was away: written when it is back
        self._restore: dict[str, str] = {}  # the switches a store that restarted empty lost
        self._writes = 0  # publishes started: a read that overlapped one is dropped
        self._reload_script = True  # load the schedule script into the server at the next good read
        self._next_heartbeat = 0.0
        self._next_renew = 0.0
        self._task: asyncio.Task[None] | None = None
        # Read with the switches at each poll that reached the store (an experiment's phase: proxy/overlay.py).
        self.on_poll: list[Callable[[], Awaitable[None]]] = []

    @property
    def shared(self) -> bool:
        return self.link is not None

    # --- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Join the fleet: read its switches and origin (bounded wait), then poll. Memory: nothing to do."""
        if self.link is None:
            return
        self.loop = asyncio.get_running_loop()
        self.engine.use_store(self.schedules)
        try:
            await asyncio.wait_for(self.sync(heartbeat=True), FIRST_SYNC_TIMEOUT_S)
        except TimeoutError:
            pass
        if self.origin_ms is None:
            log.warning(
                "state store %s unreachable at start: rules bound by shared counters skip injection until it is back",
                self.link.where,
            )
        self._task = self.loop.create_task(self._poll())

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
        await self.engine.drain()
        if self.link is not None:
            await self.link.close()

    def on_config(self, config: BrownoutConfig) -> None:
        """A reload: a new config hash joins the roll call at the next poll (the origin carries over), and
        the fleet's rule toggles apply again over the file's `enabled`."""
        if config.state != self.state:
            kept = "the memory backend" if self.link is None else self.link.where
            log.warning("state: a change to the state section takes a restart; this process keeps %s", kept)
        if self.link is None:
            return
        new = config_hash(config)
        if new != self.config_hash:
            self.config_hash = new
            self._next_heartbeat = 0.0
        self.version = ""  # the next poll reads every switch again

    async def _poll(self) -> None:
        interval = self.state.poll_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            # A bug here must not end the polling (the kill switch depends on it): counted, logged once.
            await self.guard.acall("state", self.sync, context="polling the fleet's switches")

    # --- reading the fleet -------------------------------------------------------------

    async def sync(self, *, heartbeat: bool = False) -> None:
        """One poll: pending switches out, the fleet's switches in; with the heartbeat, the roll call."""
        if self.switches is None:
            return
        now = time.monotonic()
        if self._restore:
            # The store came back empty: put the switches back as this replica knew them, unless another
            # replica (or the control API) wrote them since.
            restore, self._restore = self._restore, {}
            if await self.switches.write(restore, if_version=EMPTY_VERSION) is None:
                self._restore = restore
                return
        if self._pending:
            pending = dict(self._pending)
            if await self.switches.write(pending) is None:
                return
            for k in pending:
                if self._pending.get(k) == pending[k]:
                    del self._pending[k]
            log.warning("state store: switches set while it was away are now fleet-wide: %s", pending)
        beat = heartbeat or now >= self._next_heartbeat
        writes = self._writes
        args = None
        if beat:
            candidate = self.origin_ms or str(int(time.time() * 1000))
            args = (self.replica, self.config_hash, self.engine.paused, ROLL_CALL_TTL_S, candidate)
        view = await self.switches.read(self.version, heartbeat=args)
        if view is None:
            self._reload_script = True
            return  # fail-safe: keep the last known switches
        if self._reload_script:
            # Back after an outage (maybe a restarted, empty server): the schedule script is loaded again
            # here, so that the first exchange does not pay the round trips of loading it.
            self._reload_script = not await self._redis.load()
        if beat:
            self._next_heartbeat = now + HEARTBEAT_S
            self._roll_call(view)
        if writes == self._writes:  # a publish overlapped this read: its own answer is newer
            self._apply(view)
        if self._redis.epoch is not None and now >= self._next_renew:
            self._next_renew = now + self.state.lease_ttl_s / 3
            await self._redis.renew(time.time())
        for read in self.on_poll:
            await read()

    def _roll_call(self, view: FleetView) -> None:
        if view.origin is not None and view.origin != self.origin_ms:
            self.origin_ms = view.origin
            self._redis.epoch = view.origin
            self.engine.set_origin(int(view.origin) / 1000)
            log.info("fleet origin %s (config %s)", view.origin, self.config_hash)
        self.replicas = view.replicas
        others = {r.config_hash for r in view.replicas if r.config_hash != self.config_hash}
        for other in sorted(others - self.mismatched):
            ids = ", ".join(r.id for r in view.replicas if r.config_hash == other)
            log.warning(
                "fleet: replica(s) %s run config %s, this one (%s) runs %s: their schedules count apart; "
                "the kill switch and rule toggles are still shared",
                ids,
                other,
                self.replica,
                self.config_hash,
            )
        self.mismatched = others

    def _apply(self, view: FleetView) -> None:
        previous = self.version
        self.version = view.version
        if view.switches is None:
            if view.version == EMPTY_VERSION and previous not in ("", EMPTY_VERSION) and self.known:
                # The store lost its data (restarted empty): the next poll puts the switches back and loads the
                # schedule script again. The link may never have seen it away: a restart between two polls
                # costs no call a failure, the pool just reconnects.
                self._restore = dict(self.known)
                self._reload_script = True
            return
        self.known = view.switches
        paused = view.switches.get(PAUSED)
        if paused == "1" and not self.engine.paused:
            self.engine.pause()
        elif paused == "0" and self.engine.paused:
            self.engine.resume()
        names = {r.name: r for r in self.engine.rules}
        for name, value in view.switches.items():
            rule = names.get(name[len(RULE) :]) if name.startswith(RULE) else None
            if rule is not None and rule.enabled != (value == "1"):
                self.engine.set_rule_enabled(rule.name, value == "1")
                log.warning("fleet: rule %s %s", rule.name, "enabled" if value == "1" else "disabled")

    # --- writing the fleet -------------------------------------------------------------

    async def publish(self, fields: dict[str, str]) -> dict[str, Any]:
        """Write switches for the whole fleet (already applied here); what the control API answers."""
        if self.switches is None or self.link is None:
            return {}
        self._writes += 1
        view = await self.switches.write(fields)
        if view is None:
            self._pending.update(fields)
            return {
                "fleet": False,
                "warning": f"the state store {self.link.where} could not be reached: this replica only; "
                "the rest of the fleet gets it once the store is back",
            }
        self._apply(view)
        return {"fleet": True}

    def publish_from_thread(self, fields: dict[str, str], timeout_s: float = 5.0) -> dict[str, Any]:
        """`publish` from another thread (the control API's): runs on the proxy's loop."""
        if self.loop is None or self.switches is None:
            return {}
        future = asyncio.run_coroutine_threadsafe(self.publish(fields), self.loop)
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError:  # the proxy's loop is that busy: the switch applies here all the same
            return {
                "fleet": False,
                "warning": f"writing the switch for the fleet did not finish within {timeout_s:g} s; this replica "
                "has it, the rest of the fleet gets it if the write goes through",
            }

    # --- reporting ---------------------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """For /status: the store, and the fleet as the last roll call saw it."""
        if self.link is None:
            return {"backend": "memory"}
        return {
            **self._redis.describe(),
            "replica": self.replica,
            "config_hash": self.config_hash,
            "origin": None if self.origin_ms is None else int(self.origin_ms) / 1000,
            "switches_version": self.version,
            "pending_switches": dict(self._pending),
            "config_mismatch": sorted(self.mismatched),
            "replicas": [
                {"id": r.id, "config_hash": r.config_hash, "paused": r.paused, "seen_s_ago": r.seen_s_ago}
                for r in self.replicas
            ],
        }

    async def fleet_counters(self) -> dict[str, dict[str, int]] | None:
        """The fleet's counters of this config's counted rules (None: memory, or the store away)."""
        if self.link is None:
            return None
        rules = [(r.name, r.key) for r in self.engine.rules if r.counted]
        return await self._redis.counters(rules, time.time())

    def status_from_thread(self, timeout_s: float = 2.0) -> dict[str, Any]:
        """`describe()` plus the fleet's rule counters, read on the proxy's loop (the control API's thread)."""
        out = self.describe()
        if self.loop is not None and self.link is not None:
            future = asyncio.run_coroutine_threadsafe(self.fleet_counters(), self.loop)
            try:
                out["rules"] = future.result(timeout=timeout_s)
            except TimeoutError:
                out["rules"] = None
        return out

    def up(self) -> bool | None:
        """The store's reachability (None: memory, or not known yet)."""
        return None if self.link is None else self.link.up


async def start_fleet(addon: Any) -> Fleet:
    """Build and start the proxy's fleet from its config (in `running`, on the proxy's loop); its
    failures and reachability feed the metrics of whichever exporters the proxy has."""
    fleet = Fleet(
        addon.config,
        addon.engine,
        on_error=lambda op: addon.pipeline.exporters.on_state_error(op),
        guard=addon.guard,
    )
    await fleet.start()
    if fleet.shared:
        addon.pipeline.exporters.watch_state(
            up=fleet.up, config_mismatch=lambda: len(fleet.mismatched), replicas=lambda: len(fleet.replicas)
        )
    return fleet
