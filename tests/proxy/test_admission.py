"""Admission: new connections start at most `admit_per_tick` per loop iteration, in arrival order."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from brownout.core.guard import Guard
from brownout.proxy.admission import Admission
from brownout.proxy.config import ProxySettings

TCP = SimpleNamespace(transport_protocol="tcp")


class Ticks:
    """Counts event-loop iterations: a callback that re-schedules itself once per iteration."""

    def __init__(self) -> None:
        self.n = 0
        self._handle: asyncio.Handle | None = None

    def start(self) -> None:
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self._handle = asyncio.get_running_loop().call_soon(self._tick)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()


async def burst(admission: Admission, clients: list[Any]) -> list[tuple[int, int]]:
    """All clients connect in one iteration; (client index, iteration admitted) in the order admitted."""
    ticks, admitted = Ticks(), []
    ticks.start()

    async def connect(i: int, client: Any) -> None:
        await admission.client_connected(client)
        admitted.append((i, ticks.n))

    try:
        await asyncio.gather(*(connect(i, c) for i, c in enumerate(clients)))
    finally:
        ticks.stop()
    return admitted


def make(per_tick: int, waits: list[float] | None = None, guard: Guard | None = None) -> Admission:
    on_wait = (waits.append if waits is not None else (lambda s: None)) if guard is None else (lambda s: 1 / 0)
    return Admission(ProxySettings(admit_per_tick=per_tick), guard or Guard(strict=True), on_wait=on_wait)


def per_iteration(admitted: list[tuple[int, int]]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for _, tick in admitted:
        counts[tick] = counts.get(tick, 0) + 1
    return counts


def test_a_burst_is_admitted_a_quota_per_iteration_in_arrival_order() -> None:
    waits: list[float] = []
    admission = make(2, waits)
    admitted = asyncio.run(burst(admission, [TCP] * 7))
    assert [i for i, _ in admitted] == list(range(7))  # first come, first started
    counts = per_iteration(admitted)
    assert max(counts.values()) == 2 and len(counts) == 4  # 2 + 2 + 2 + 1, one iteration after another
    assert len(waits) == 5 and all(w >= 0 for w in waits)  # the first two never waited
    assert admission.waiting == 0


def test_zero_admits_every_connection_at_once() -> None:
    waits: list[float] = []
    admitted = asyncio.run(burst(make(0, waits), [TCP] * 7))
    assert len(per_iteration(admitted)) == 1 and waits == []


def test_other_transports_are_never_held() -> None:
    udp = SimpleNamespace(transport_protocol="udp")
    admitted = asyncio.run(burst(make(1), [udp] * 5))
    assert len(per_iteration(admitted)) == 1


def test_a_connection_gone_while_waiting_spends_no_quota() -> None:
    async def scenario() -> tuple[list[int], int]:
        admission = make(1)
        ticks, started = Ticks(), []
        ticks.start()

        async def connect(i: int) -> None:
            await admission.client_connected(TCP)
            started.append(i)

        tasks = [asyncio.create_task(connect(i)) for i in range(4)]
        await asyncio.sleep(0)  # all four are in: 0 started, 1..3 wait
        tasks[1].cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        ticks.stop()
        return started, admission.waiting

    started, waiting = asyncio.run(scenario())
    assert started == [0, 2, 3] and waiting == 0


def test_lowering_the_quota_to_zero_on_reload_lets_every_waiting_connection_go() -> None:
    async def scenario() -> list[tuple[int, int]]:
        admission = make(1)
        task = asyncio.ensure_future(burst(admission, [TCP] * 6))
        await asyncio.sleep(0)
        admission.settings = ProxySettings(admit_per_tick=0)
        return await task

    counts = per_iteration(asyncio.run(scenario()))
    assert len(counts) <= 3  # the first, then at most one more at quota 1, then all the rest together


def test_a_failing_wait_metric_never_holds_a_connection_back() -> None:
    guard = Guard()
    admitted = asyncio.run(burst(make(1, guard=guard), [TCP] * 3))
    assert len(admitted) == 3 and guard.errors["prometheus"] == 2
