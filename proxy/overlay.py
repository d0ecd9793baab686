"""A staging experiment's phase on this proxy: its rules laid over the config's, held by a lease.

A runner (`brownout experiment run` with a `target:`) switches a phase on in one of two ways:

- through the fleet's shared store (a fleet on Redis): the phase and its lease are one key
  (core/state/overlay.py); every replica reads it at each poll of the fleet's switches
  (`state.poll_interval_ms`), applies it, and acknowledges it in the store;
- through the control API (`POST /experiment/phase`, proxy/control_experiment.py): with a fleet on
  Redis the call writes the same key (the whole fleet follows); without one, this process holds the
  lease itself.

Either way the phase lasts as long as its lease: the runner renews it; when it is not renewed
(the runner was killed, its host lost), this process drops the phase when the lease runs out by its
own clock, whether or not the store can be reached. Overlay rules are named
`EXPERIMENT/PHASE/RULE`, so faults, decisions and the dashboard say which phase they came from, and
`brownout_experiment_phase{experiment, phase}` is 1 while the phase is applied here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import Field, TypeAdapter, ValidationError

from brownout.core.config import Model
from brownout.core.state.overlay import RedisOverlay
from brownout.faults.config import RuleConfig, Rules
from brownout.faults.engine import FaultEngine
from brownout.proxy.config import BrownoutConfig

__all__ = ["Conflict", "PhaseBody", "PhaseOverlay", "overlay_rule_name", "validation_message"]

log = logging.getLogger(__name__)

HISTORY = 16  # phases kept in brownout_experiment_phase (at 0) once removed: a bounded label set
_ID = r"^[A-Za-z0-9_.:-]{1,128}$"
_NAME = r"^[A-Za-z0-9_.-]{1,64}$"
_RULES: TypeAdapter[list[RuleConfig]] = TypeAdapter(Rules)


class Conflict(Exception):
    """Another run of an experiment holds the fleet."""


class PhaseBody(Model):
    """One phase as a runner sends it (the store's `body`, the control API's request)."""

    owner: str = Field(pattern=_ID, description="The run of the experiment: only it renews or removes the phase.")
    id: str = Field(pattern=_ID, description="This phase of that run; a new id is a new phase (fresh counters).")
    experiment: str = Field(pattern=_NAME)
    phase: str = Field(pattern=_NAME)
    rules: list[dict[str, Any]] = Field(min_length=1, description="Rules as in a chaos config.")
    lease_s: float = Field(gt=0, le=3600, description="Dropped this long after the last renewal.")
    started_at: float = Field(description="Unix time the phase started: the base of its rules' time windows.")


def overlay_rule_name(experiment: str, phase: str, rule: str) -> str:
    """The name an experiment phase's rule runs under: faults and metrics say where it came from."""
    return f"{experiment}/{phase}/{rule}"


def validation_message(error: ValidationError, prefix: str = "") -> str:
    """pydantic's errors as `field.path: message` lines."""
    lines = []
    for err in error.errors(include_url=False):
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.get("loc", ()))
        lines.append(f"{prefix}{loc}: {err.get('msg', 'invalid value')}".lstrip("."))
    return "; ".join(lines)


@dataclass(slots=True)
class Applied:
    """The phase applied here, and until when."""

    body: PhaseBody
    rules: list[str]
    source: str  # "store" or "control"
    applied_at: float
    deadline: float  # monotonic


class PhaseOverlay:
    """This proxy's experiment phase; every method but `phases` and `describe` runs on the proxy's loop."""

    def __init__(
        self,
        engine: FaultEngine,
        *,
        config: Callable[[], BrownoutConfig],
        store: RedisOverlay | None = None,
        replica: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.engine = engine
        self.config = config
        self.store = store
        self.replica = replica
        self.clock = clock
        self.current: Applied | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self._history: tuple[tuple[str, str], ...] = ()  # replaced whole: the scrape thread reads it
        self._timer: asyncio.TimerHandle | None = None
        self._known = ""  # the store's phase id last read (applied or rejected)
        self._ack = ""  # what this replica says about it at its next read

    # --- the rules ----------------------------------------------------------------------

    def rules_of(self, body: PhaseBody) -> list[RuleConfig]:
        """The phase's rules, renamed and validated with this proxy's fault types; ValueError naming the field."""
        renamed = []
        for i, rule in enumerate(body.rules):
            name = rule.get("name")
            if not isinstance(name, str) or not name:
                raise ValueError(f"rules[{i}].name: every rule needs a name")
            renamed.append({**rule, "name": overlay_rule_name(body.experiment, body.phase, name)})
        context = self.config().catalogue.validation_context()
        try:
            return _RULES.validate_python(renamed, context=context)
        except ValidationError as e:
            raise ValueError(validation_message(e, "rules")) from None

    def _apply(self, body: PhaseBody, source: str, lease_s: float) -> None:
        rules = self.rules_of(body)
        self.engine.set_overlay(rules, origin=body.started_at, counters_tag=body.id)
        self.current = Applied(body, [r.name for r in rules], source, time.time(), self.clock() + lease_s)
        key = (body.experiment, body.phase)
        self._history = (*[k for k in self._history if k != key], key)[-HISTORY:]
        self._arm(body.id, lease_s)
        log.warning(
            "experiment %s: phase %s applied (%d rules, lease %.1f s, from the %s)",
            body.experiment,
            body.phase,
            len(rules),
            lease_s,
            source,
        )

    def _arm(self, phase_id: str, lease_s: float) -> None:
        if self.current is not None:
            self.current.deadline = self.clock() + lease_s
        if self._timer is not None:
            self._timer.cancel()
        loop = self.loop or asyncio.get_running_loop()
        self._timer = loop.call_later(lease_s, self._lapsed, phase_id)

    def _lapsed(self, phase_id: str) -> None:
        if self.current is not None and self.current.body.id == phase_id:
            self.drop("its lease ran out (not renewed in time)")

    def drop(self, reason: str) -> None:
        """Back to the config's own rules."""
        current, self.current = self.current, None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if current is None:
            return
        self.engine.clear_overlay()
        log.warning("experiment %s: phase %s removed: %s", current.body.experiment, current.body.phase, reason)

    # --- from the store (each poll of the fleet's switches) -------------------------------

    async def poll(self) -> None:
        """Read the fleet's phase: apply a new one, renew the lease of the one applied, drop one gone."""
        if self.store is None:
            return
        record = await self.store.read(self._known, replica=self.replica, ack=self._ack)
        if record is None:
            return  # the store is away: the phase lasts until its lease runs out here
        if not record.id:
            self._known = self._ack = ""
            if self.current is not None and self.current.source == "store":
                self.drop("removed from the fleet's store, or its lease ran out")
            return
        if record.body is None:
            if self.current is not None and self.current.body.id == record.id:
                self._arm(record.id, record.ttl_ms / 1000)
            return
        self._known = record.id
        try:
            body = PhaseBody.model_validate_json(record.body)
            self._apply(body, "store", record.ttl_ms / 1000)
        except (ValidationError, ValueError) as e:
            why = validation_message(e) if isinstance(e, ValidationError) else str(e)
            self._ack = f"{record.id} rejected: {why}"
            self.drop("the fleet's store holds a phase this replica cannot apply")
            log.error("experiment phase %s rejected: %s", record.id, why)
        else:
            self._ack = f"{record.id} ok"
        # Said at once, not at the next poll: the runner measures how fast the whole fleet has the phase.
        await self.store.read(self._known, replica=self.replica, ack=self._ack)

    # --- from the control API --------------------------------------------------------------

    async def put(self, raw: Mapping[str, Any]) -> dict[str, Any]:
        """Apply (or renew) a phase: through the store for the whole fleet when there is one, else here.

        ValueError for a bad phase (nothing changes), Conflict when another run holds the fleet."""
        try:
            body = PhaseBody.model_validate(raw)
        except ValidationError as e:
            raise ValueError(validation_message(e)) from None
        self.rules_of(body)  # a bad rule is refused before anything is written
        renewal = self.current is not None and self.current.body.id == body.id
        out: dict[str, Any] = {"applied": True, "renewed": renewal, "rules": self._names(body)}
        if self.store is not None:
            written = await self.store.put(body.owner, body.id, body.model_dump_json(), int(body.lease_s * 1000))
            if written is not None and not written.ok:
                raise Conflict(f"another run of an experiment holds the fleet: {written.owner}")
            out["fleet"] = written is not None
            if written is None:
                out["warning"] = "the state store could not be reached: this replica only, until its lease ends"
        if renewal:
            self._arm(body.id, body.lease_s)
        else:
            if self.current is not None and self.current.body.owner != body.owner and self.store is None:
                raise Conflict(f"another run of an experiment holds this proxy: {self.current.body.owner}")
            self._apply(body, "store" if out.get("fleet") else "control", body.lease_s)
            if out.get("fleet") and self.store is not None:  # acknowledged now; polls read it as known
                self._known, self._ack = body.id, f"{body.id} ok"
                await self.store.read(self._known, replica=self.replica, ack=self._ack)
        return out

    async def renew(self, raw: Mapping[str, Any]) -> bool:
        """Extend the lease of the phase in `raw` if it is still applied (False: removed, or lapsed); never
        applies it again, so a phase someone removed stays removed."""
        try:
            body = PhaseBody.model_validate(raw)
        except ValidationError as e:
            raise ValueError(validation_message(e)) from None
        here = self.current is not None and self.current.body.id == body.id
        if self.store is not None:
            renewed = await self.store.renew(body.owner, int(body.lease_s * 1000))
            if renewed is False:
                return False
        if here:
            self._arm(body.id, body.lease_s)
        return here or self.store is not None

    def _names(self, body: PhaseBody) -> list[str]:
        return [overlay_rule_name(body.experiment, body.phase, str(r.get("name"))) for r in body.rules]

    async def remove(self, owner: str = "") -> dict[str, Any]:
        """Remove the phase (only `owner`'s, when given): here, and from the store for the whole fleet."""
        out: dict[str, Any] = {}
        if self.store is not None:
            cleared = await self.store.clear(owner)
            if cleared == -1:
                raise Conflict("the phase applied belongs to another run of an experiment")
            out["fleet"], out["cleared"] = cleared is not None, cleared == 1
        current = self.current
        if current is not None and (not owner or current.body.owner == owner):
            self.drop("removed through the control API")
            out["removed"] = {"experiment": current.body.experiment, "phase": current.body.phase}
        else:
            out["removed"] = None
        return out

    async def fleet_view(self) -> dict[str, Any]:
        """The phase here, and with a store the fleet's replicas and their acknowledgements."""
        out: dict[str, Any] = {"replica": self.replica, "applied": self.describe()}
        if self.store is not None:
            roll = await self.store.roll_call()
            out["fleet"] = (
                None if roll is None else {"seen_s_ago": roll.seen_s_ago, "paused": roll.paused, "acks": roll.acks}
            )
        return out

    # --- reading (any thread) ---------------------------------------------------------------

    def phases(self) -> dict[tuple[str, str], float]:
        """For brownout_experiment_phase: the phases applied lately, 1 for the one applied now."""
        current = self.current
        now = (current.body.experiment, current.body.phase) if current is not None else None
        return {key: 1.0 if key == now else 0.0 for key in self._history}

    def describe(self) -> dict[str, Any] | None:
        """For /status: the phase applied, its rules and the lease left."""
        current = self.current
        if current is None:
            return None
        body = current.body
        return {
            "experiment": body.experiment,
            "phase": body.phase,
            "id": body.id,
            "owner": body.owner,
            "rules": current.rules,
            "source": current.source,
            "applied_at": current.applied_at,
            "lease_left_s": round(max(0.0, current.deadline - self.clock()), 3),
        }

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def start_overlay(addon: Any) -> PhaseOverlay:
    """This proxy's phase holder (in `running`, after the fleet): polled with the fleet's switches."""
    fleet = addon.fleet
    link = fleet.link if fleet is not None else None
    overlay = PhaseOverlay(
        addon.engine,
        config=lambda: addon.config,
        store=RedisOverlay(link) if link is not None else None,
        replica=fleet.replica if fleet is not None else "",
    )
    overlay.loop = asyncio.get_running_loop()
    if fleet is not None and link is not None:
        fleet.on_poll.append(overlay.poll)
    addon.pipeline.exporters.watch_experiment(overlay.phases)
    return overlay
