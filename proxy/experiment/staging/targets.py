"""The running fleet as the staging runner reaches it: through its shared store, or its control APIs.

Both do the same five things: say who is in the fleet (and whether it is paused, or held by another
experiment), apply a phase, renew its lease, say which replicas acknowledged it, remove it, and pull
the kill switch. A call that fails raises `TargetError` naming what failed; credentials (the Redis
password, the token) never appear in a message or in `describe()`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx

from brownout.core.state import RedisLink, StateConfig
from brownout.core.state.overlay import RedisOverlay
from brownout.core.state.switches import RedisSwitches
from brownout.proxy.control_experiment import PATH
from brownout.proxy.experiment.staging.config import Target
from brownout.proxy.fleet import ROLL_CALL_TTL_S
from brownout.proxy.overlay import PhaseBody

__all__ = ["ControlTarget", "FleetTarget", "FleetView", "StoreTarget", "TargetError", "open_target"]

log = logging.getLogger(__name__)


class TargetError(Exception):
    """The fleet could not be reached, or refused what the runner asked."""


@dataclass(slots=True)
class FleetView:
    """Who is in the fleet: replica -> paused, another run's phase if one is applied, and acknowledgements."""

    replicas: dict[str, bool] = field(default_factory=dict)
    held_by: str | None = None  # "<experiment>/<phase> (run <owner>)" of another run
    acks: dict[str, str] = field(default_factory=dict)  # replica -> "<phase id> ok" / "... rejected: why"


class FleetTarget(Protocol):
    """What the runner drives (see the module docstring)."""

    async def view(self, owner: str) -> FleetView: ...
    async def apply(self, body: PhaseBody) -> None: ...
    async def renew(self, body: PhaseBody) -> bool: ...
    async def remove(self, owner: str) -> None: ...
    async def pause(self) -> None: ...
    async def close(self) -> None: ...
    def describe(self) -> dict[str, Any]: ...


def _holder(body: str, owner: str) -> str | None:
    try:
        data = json.loads(body)
    except ValueError:
        return "an unreadable phase"
    if data.get("owner") == owner:
        return None
    return f"{data.get('experiment')}/{data.get('phase')} (run {data.get('owner')})"


class StoreTarget:
    """The fleet's Redis: the phase is one key with the lease as its expiry; the kill switch its switches."""

    def __init__(self, target: Target, environ: Mapping[str, str] | None = None) -> None:
        url = target.state_url(environ)
        if url is None:
            raise TargetError(f"target.state_env: {target.state_env} is not set")
        timeout_ms = target.timeout_s * 1000
        config = StateConfig(
            backend="redis", url=url, key_prefix=target.key_prefix, timeout_ms=timeout_ms, connect_timeout_ms=timeout_ms
        )
        self.where = config.display_url()
        self.lease_ms = int(target.lease_s * 1000)
        self.link = RedisLink(config)
        self.overlay = RedisOverlay(self.link)
        self.switches = RedisSwitches(self.link)

    def _away(self, what: str) -> TargetError:
        return TargetError(f"the fleet's store {self.where} could not be reached ({what})")

    async def view(self, owner: str) -> FleetView:
        roll, record = await asyncio.gather(self.overlay.roll_call(), self.overlay.read(""))
        if roll is None or record is None:
            raise self._away("reading its replicas")
        live = {r: roll.paused.get(r, False) for r, ago in roll.seen_s_ago.items() if ago <= ROLL_CALL_TTL_S}
        held = _holder(record.body, owner) if record.id and record.body is not None else None
        return FleetView(live, held, {r: a for r, a in roll.acks.items() if r in live})

    async def apply(self, body: PhaseBody) -> None:
        written = await self.overlay.put(body.owner, body.id, body.model_dump_json(), self.lease_ms)
        if written is None:
            raise self._away(f"applying phase {body.phase}")
        if not written.ok:
            raise TargetError(f"another experiment holds the fleet: {_holder(written.body, body.owner)}")

    async def renew(self, body: PhaseBody) -> bool:
        renewed = await self.overlay.renew(body.owner, self.lease_ms)
        if renewed is None:
            raise self._away("renewing the lease")
        return renewed

    async def remove(self, owner: str) -> None:
        if await self.overlay.clear(owner) is None:
            raise self._away("removing the phase; it ends with its lease")

    async def pause(self) -> None:
        if await self.switches.write({"paused": "1"}) is None:
            raise self._away("pulling the kill switch")

    async def close(self) -> None:
        await self.link.close()

    def describe(self) -> dict[str, Any]:
        return {"kind": "state", "state": self.where, "key_prefix": self.link.prefix}


class ControlTarget:
    """The replicas' control APIs: each URL is asked; with a fleet on Redis one URL reaches every replica."""

    def __init__(self, target: Target, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        token = env.get(target.token_env)
        if not token:
            raise TargetError(f"target.token_env: {target.token_env} is not set (the control API's token)")
        self.urls = [u.rstrip("/") for u in target.control or []]
        self.http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {token}"}, timeout=target.timeout_s, trust_env=False
        )

    async def _call(self, url: str, method: str, path: str, **kw: Any) -> tuple[int, Any]:
        try:
            response = await self.http.request(method, url + path, **kw)
            return response.status_code, response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise TargetError(f"{url}{path}: {type(e).__name__}: {e}") from e

    async def _each(self, method: str, path: str, **kw: Any) -> list[tuple[str, int, Any]]:
        answers = await asyncio.gather(*(self._call(u, method, path, **kw) for u in self.urls))
        return [(u, status, body) for u, (status, body) in zip(self.urls, answers, strict=True)]

    @staticmethod
    def _check(answers: list[tuple[str, int, Any]], what: str) -> None:
        for url, status, body in answers:
            if status != 200:
                error = body.get("error") if isinstance(body, dict) else body
                raise TargetError(f"{url}: {what}: HTTP {status}: {error}")

    async def view(self, owner: str) -> FleetView:
        """The replicas from the fleet's roll call where a URL has a store behind it (a workers' supervisor
        or a Service reaches the whole fleet), else each URL as one replica, paused as its /status says."""
        out = FleetView()
        phases = await self._each("GET", PATH)
        self._check(phases, "experiment phase")
        alone = [url for url, _, phase in phases if not phase.get("fleet")]
        statuses = dict(
            zip(alone, await asyncio.gather(*(self._call(u, "GET", "/status") for u in alone)), strict=True)
        )
        for url, _, phase in phases:
            fleet = phase.get("fleet")
            applied = phase.get("applied")
            if applied and applied.get("owner") != owner:
                out.held_by = f"{applied['experiment']}/{applied['phase']} (run {applied['owner']})"
            if fleet:
                live = {r for r, ago in fleet["seen_s_ago"].items() if ago <= ROLL_CALL_TTL_S}
                out.replicas.update({r: bool(fleet["paused"].get(r)) for r in live})
                out.acks.update({r: a for r, a in fleet["acks"].items() if r in live})
                continue
            status, body = statuses[url]
            self._check([(url, status, body)], "status")
            out.replicas[url] = bool(body.get("paused"))
            if applied:
                out.acks[url] = f"{applied['id']} ok"
        return out

    async def apply(self, body: PhaseBody) -> None:
        answers = await self._each("POST", PATH, json=body.model_dump(mode="json"))
        for url, status, answer in answers:
            if status == 409:
                raise TargetError(f"another experiment holds the fleet ({url}): {answer.get('error')}")
        self._check(answers, f"applying phase {body.phase}")

    async def renew(self, body: PhaseBody) -> bool:
        answers = await self._each("POST", PATH, params={"renew": "1"}, json=body.model_dump(mode="json"))
        if any(status == 410 for _, status, _ in answers):
            return False  # removed (brownout ctl experiment --stop), or lapsed: never applied again here
        self._check(answers, f"renewing phase {body.phase}")
        return True

    async def remove(self, owner: str) -> None:
        self._check(await self._each("DELETE", PATH, params={"owner": owner}), "removing the phase")

    async def pause(self) -> None:
        self._check(await self._each("POST", "/faults/pause"), "pulling the kill switch")

    async def close(self) -> None:
        await self.http.aclose()

    def describe(self) -> dict[str, Any]:
        return {"kind": "control", "control": list(self.urls)}


def open_target(target: Target, environ: Mapping[str, str] | None = None) -> FleetTarget:
    """The store or the control APIs, as the file says."""
    if target.control is not None:
        return ControlTarget(target, environ)
    return StoreTarget(target, environ)
