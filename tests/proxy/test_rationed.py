"""proxy/rationed.py: deferred work runs in order, at most its budget per window while a backlog lasts,
at once when overdue, and all of it at shutdown; a failure is contained and the next piece still runs."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace

import pytest

from brownout.core.guard import Guard
from brownout.proxy.rationed import Rationed
from brownout.proxy.realtime import Realtime


def _busy(ms: float, done: list[int], n: int) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass
    done.append(n)


def test_within_its_budget_work_runs_on_the_next_turn_in_order() -> None:
    async def main() -> tuple[list[int], list[int], int]:
        lane = Rationed(Guard(), component="test")
        done: list[int] = []
        for n in range(5):
            lane.submit(done.append, n)
        before = list(done)
        await asyncio.sleep(0)
        return before, done, lane.deferred

    before, done, deferred = asyncio.run(main())
    assert before == [] and done == [0, 1, 2, 3, 4] and deferred == 0


def test_a_backlog_takes_at_most_its_budget_per_window_and_the_loop_runs_between() -> None:
    async def main() -> tuple[list[int], list[int], list[int], int]:
        lane = Rationed(Guard(), component="test", budget_s=0.0025, window_s=0.05, max_delay_s=10)
        done: list[int] = []
        for n in range(12):
            lane.submit(_busy, 1.0, done, n)  # 12 ms of work, 2.5 ms of it per 50 ms window
        await asyncio.sleep(0)
        first_turn = list(done)
        live: list[int] = []
        asyncio.get_running_loop().call_soon(lambda: live.append(len(done)))
        while lane.pending:
            await asyncio.sleep(0.01)
        return first_turn, done, live, lane.deferred

    first_turn, done, live, deferred = asyncio.run(main())
    assert 1 <= len(first_turn) <= 3  # each piece is checked against the budget before it runs
    assert done == list(range(12))  # in the order submitted
    assert live and live[0] < 12  # live work got the loop before the backlog was through
    assert deferred >= 3


def test_work_older_than_max_delay_runs_at_once() -> None:
    async def main() -> list[int]:
        lane = Rationed(Guard(), component="test", budget_s=0.001, window_s=10, max_delay_s=0)
        done: list[int] = []
        for n in range(6):
            lane.submit(_busy, 1.0, done, n)
        await asyncio.sleep(0)
        return done

    assert asyncio.run(main()) == list(range(6))


def test_a_failure_is_contained_and_counted_and_the_next_piece_runs() -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    async def main(guard: Guard) -> list[int]:
        # A budget the first traceback's logging cannot spend (it takes milliseconds on a cold start).
        lane = Rationed(guard, component="realtime", budget_s=10, window_s=10)
        done: list[int] = []
        lane.submit(boom)
        lane.submit(done.append, 1)
        await asyncio.sleep(0)
        return done

    guard = Guard()
    assert asyncio.run(main(guard)) == [1]
    assert guard.total == 1 and list(guard.snapshot()) == ["realtime"]


def test_flush_runs_what_is_left_now_and_nothing_twice() -> None:
    async def main() -> tuple[int, list[int]]:
        lane = Rationed(Guard(), component="test", budget_s=0.001, window_s=60, max_delay_s=60)
        done: list[int] = []
        for n in range(4):
            lane.submit(_busy, 2.0, done, n)
        await asyncio.sleep(0)  # the first piece spends the window's budget
        ran = lane.flush()
        await asyncio.sleep(0.01)
        return ran, done

    ran, done = asyncio.run(main())
    assert ran == 3 and done == [0, 1, 2, 3]


def test_without_a_running_loop_work_runs_at_once() -> None:
    done: list[int] = []
    Rationed(Guard(), component="test").submit(done.append, 7)
    assert done == [7]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"budget_s": 0}, "budget_s"),
        ({"budget_s": 0.2, "window_s": 0.1}, "budget_s"),
        ({"max_delay_s": -1}, "max_delay_s"),
    ],
)
def test_bad_parameters_are_refused_by_name(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(ValueError, match=field):
        Rationed(Guard(), component="test", **kwargs)


def test_realtime_shutdown_completes_what_ended_before_cutting_open_sessions() -> None:
    async def main() -> list[str]:
        realtime = Realtime(SimpleNamespace(guard=Guard()))
        realtime.ended.budget_s, realtime.ended.window_s, realtime.ended.max_delay_s = 0.001, 60, 60
        done: list[str] = []
        realtime.ended.submit(_busy, 2.0, [], 0)  # spends the window's budget
        realtime.ended.submit(done.append, "generation")
        await asyncio.sleep(0)
        assert done == []
        realtime.cut_all()
        return done

    assert asyncio.run(main()) == ["generation"]
