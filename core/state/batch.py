"""The proxy's Redis commands, many exchanges' in one write: what the link's hot calls share.

redis-py sends each call on its own: a connection out of the pool, one write, one read. Each write
is a system call that wakes Redis, and on a busy machine those wakeups, not Redis's work, are what
an exchange's calls cost. redis-py has no automatic pipelining, so the link does it here: the
commands its callers issue while the loop runs one turn leave together, pipelined on one
connection (one write, the replies read in order) when the loop comes round. Nothing else changes:
each command is what it was (a Lua script is atomic by itself; a pipeline is not a transaction, so
it joins nothing), and commands run in the order they were issued, but for one thing: in a write, the
calls someone waits on go ahead of those that linger (below). Each call's future gets its replies as
soon as they are read, not when the whole write's are.

A call that nobody waits on before answering the agent (a session commit, after the response) may
*linger*: it waits up to `linger_s` for the next call someone does wait on (the next exchange's
decision) and leaves in its write, instead of a write of its own. So at one connection an exchange
costs about one write, and under load many exchanges share one. It goes behind that decision, not ahead
of it: Redis runs a write's commands one after the other, so a session commit ahead of the next decision
would add its own run time to the decision's wait, on the path of the agent's request. Behind it, the
commit only waits a little longer, which lingering already allows; no lingering call writes a key a
decision reads (decisions, quota and lease calls are never lingering).

A batch has the link's budget from the moment it leaves: a batch that fails or outlasts it fails
every call in it, and each caller counts its own failure. The Lua scripts are sent by digest
(EVALSHA); a server that lacks one (first use, a restarted Redis) gets it and the commands that
needed it again, in the same budget.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hiredis import pack_command
from redis.asyncio.connection import AbstractConnection, ConnectionPool
from redis.exceptions import DataError, NoScriptError, ResponseError

from brownout.core.state.deadline import within

__all__ = ["BATCH_MAX", "LINGER_S", "Batcher", "Command", "Lua"]

log = logging.getLogger(__name__)

BATCH_MAX = 128  # commands per write at most; more go in further writes at once
LINGER_S = 0.005  # how long a call nobody waits on waits for company
KEEP_CONNECTIONS = 4

Command = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Lua:
    """A server-side script, sent by its digest."""

    source: str
    sha: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode(), usedforsecurity=False).hexdigest())

    def command(self, keys: Sequence[Any], args: Sequence[Any]) -> Command:
        return ("EVALSHA", self.sha, len(keys), *keys, *args)


@dataclass(slots=True)
class _Call:
    commands: Sequence[Command]
    future: asyncio.Future[list[Any]]
    linger: bool = False


class Batcher:
    """Calls issued in one turn of the loop, sent in one write; lingering ones join the next urgent write."""

    def __init__(
        self, pool: ConnectionPool, timeout_s: float, *, max_commands: int = BATCH_MAX, linger_s: float = LINGER_S
    ) -> None:
        self.pool = pool
        self.timeout_s = timeout_s
        self.max_commands = max_commands
        self.linger_s = linger_s
        self.writes = 0  # batches sent: what /status and the tests count against calls
        self.calls = 0
        self._scripts: dict[str, Lua] = {}
        self._queue: list[_Call] = []
        self._queued = 0  # commands in the queue
        self._soon: asyncio.Handle | None = None
        self._later: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Connections kept between batches, out of the pool (no checkout per batch); at least one is left
        # to the pool's other callers.
        self._idle: list[AbstractConnection] = []
        self._keep = min(KEEP_CONNECTIONS, pool.max_connections - 1)

    def lua(self, source: str) -> Lua:
        script = Lua(source)
        self._scripts[script.sha] = script
        return script

    def submit(self, commands: Sequence[Command], *, linger: bool = False) -> asyncio.Future[list[Any]]:
        """Queue the call's commands; the future gets their replies (an error reply as the exception it is)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Any]] = loop.create_future()
        self._queue.append(_Call(commands, future, linger))
        self._queued += len(commands)
        self.calls += 1
        if not linger or self._queued >= self.max_commands:
            if self._soon is None:
                self._soon = loop.call_soon(self._flush)
        elif self._later is None and self._soon is None:
            self._later = loop.call_at(loop.time() + self.linger_s, self._flush)
        return future

    def _flush(self) -> None:
        for handle in (self._soon, self._later):
            if handle is not None:
                handle.cancel()
        self._soon = self._later = None
        queue, self._queue, self._queued = self._queue, [], 0
        queue.sort(key=lambda call: call.linger)  # stable: urgent calls first, each kind in the order issued
        batch: list[_Call] = []
        size = 0
        for call in queue:
            if batch and size + len(call.commands) > self.max_commands:
                self._start(batch)
                batch, size = [], 0
            batch.append(call)
            size += len(call.commands)
        if batch:
            self._start(batch)

    def _start(self, calls: list[_Call]) -> None:
        self.writes += 1
        task = asyncio.get_running_loop().create_task(self._send(calls))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, calls: list[_Call]) -> None:
        sendable: list[_Call] = []
        packed: list[bytes] = []
        for call in calls:
            try:
                packed += [_pack(c) for c in call.commands]
            except (TypeError, ValueError) as e:  # an argument Redis cannot take fails its call only
                call.future.set_exception(DataError(f"cannot send {call.commands[0][0]}: {e}"))
                continue
            sendable.append(call)
        if not sendable:
            return
        try:
            await within(self._round_trip(sendable, packed), self.timeout_s)
        except asyncio.CancelledError:
            for call in sendable:
                call.future.cancel()
            raise
        except Exception as e:  # noqa: BLE001 - each caller decides what a failure means to it
            for call in sendable:
                if not call.future.done():
                    call.future.set_exception(e)

    async def _round_trip(self, calls: list[_Call], packed: list[bytes]) -> None:
        """Send the calls' commands in one write; each call gets its replies as soon as they are read (a call
        whose script the server lacked gets them after the script is loaded and its commands run again)."""
        conn = await self._connection()
        try:
            await conn.send_packed_command(b"".join(packed), check_health=False)
            missing: list[tuple[_Call, list[Any]]] = []
            for call in calls:
                replies = [await _read(conn) for _ in call.commands]
                if any(isinstance(r, NoScriptError) for r in replies):
                    missing.append((call, replies))
                elif not call.future.done():
                    call.future.set_result(replies)
            if missing:
                await self._load_and_retry(conn, missing)
        except BaseException:
            await conn.disconnect(nowait=True)  # replies may still be on their way: never reuse it
            await self.pool.release(conn)
            raise
        if len(self._idle) < self._keep:
            self._idle.append(conn)
        else:
            await self.pool.release(conn)

    async def _load_and_retry(self, conn: AbstractConnection, missing: list[tuple[_Call, list[Any]]]) -> None:
        """Load the scripts the server lacked (first use, a restarted Redis) and run the commands that needed them."""
        retry = [
            (replies, call.commands[i], i)
            for call, replies in missing
            for i, r in enumerate(replies)
            if isinstance(r, NoScriptError)
        ]
        scripts = {command[1]: self._scripts[command[1]] for _, command, _ in retry}
        log.debug("loading %d Lua scripts into the state store", len(scripts))
        loads = [_pack(("SCRIPT", "LOAD", s.source)) for s in scripts.values()]
        again = await _pipeline(conn, loads + [_pack(command) for _, command, _ in retry])
        for (replies, _, i), reply in zip(retry, again[len(loads) :], strict=True):
            replies[i] = reply
        for call, replies in missing:
            if not call.future.done():
                call.future.set_result(replies)

    async def _connection(self) -> AbstractConnection:
        """A connection this batcher kept from its last batch (no pool checkout), else one from the pool."""
        if self._idle:
            conn = self._idle.pop()
            try:
                await self.pool.ensure_connection(conn)  # reconnects one the server closed meanwhile
            except BaseException:
                await self.pool.release(conn)
                raise
            return conn
        fresh: AbstractConnection = await self.pool.get_connection()
        return fresh

    async def close(self) -> None:
        """Cancel what is queued and in flight (the link is closing)."""
        for handle in (self._soon, self._later):
            if handle is not None:
                handle.cancel()
        self._soon = self._later = None
        for call in self._queue:
            call.future.cancel()
        self._queue, self._queued = [], 0
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        idle, self._idle = self._idle, []
        for conn in idle:
            await self.pool.release(conn)


def _pack(command: Command) -> bytes:
    # hiredis's C packer (redis-py's asyncio client packs in Python, several times slower).
    packed: bytes = pack_command(command)
    return packed


async def _pipeline(conn: AbstractConnection, packed: list[bytes]) -> list[Any]:
    """Send the packed commands in one write, read their replies in order (an error reply kept as its exception)."""
    await conn.send_packed_command(b"".join(packed), check_health=False)
    return [await _read(conn) for _ in packed]


async def _read(conn: AbstractConnection) -> Any:
    """The next reply (an error reply as its exception). No timeout of its own: the batch's budget covers it."""
    try:
        return await conn.read_response(timeout=math.inf)
    except ResponseError as e:
        return e
