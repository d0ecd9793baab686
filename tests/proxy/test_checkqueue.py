"""The queue of shared-session checks: in order per session, bounded in flight and in waiting, drops said."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from brownout.proxy.checkqueue import OrderedJobs


def _job(log: list[str], name: str, gate: asyncio.Event | None = None) -> Callable[[], Awaitable[None]]:
    async def job() -> None:
        log.append(f"start {name}")
        if gate is not None:
            await gate.wait()
        await asyncio.sleep(0)
        log.append(f"end {name}")

    return job


def test_one_sessions_jobs_run_one_after_another_in_order() -> None:
    async def main() -> list[str]:
        jobs, log = OrderedJobs(), []
        gate = asyncio.Event()
        assert jobs.submit("s1", _job(log, "a1", gate))
        assert jobs.submit("s1", _job(log, "a2"))
        assert jobs.submit("s2", _job(log, "b1"))
        await asyncio.sleep(0.01)
        assert log == ["start a1", "start b1", "end b1"]  # s2 went on while s1's first job waited
        gate.set()
        assert await jobs.join(1) == 0
        return log

    assert asyncio.run(main())[3:] == ["end a1", "start a2", "end a2"]


def test_at_most_max_running_sessions_at_once_the_others_wait_their_turn() -> None:
    async def main() -> None:
        jobs, log = OrderedJobs(max_running=2), []
        gate = asyncio.Event()
        for name in ("s1", "s2", "s3", "s4"):
            jobs.submit(name, _job(log, name, gate))
        await asyncio.sleep(0.01)
        assert log == ["start s1", "start s2"] and jobs.running == 2 and jobs.queued == 2
        gate.set()
        assert await jobs.join(1) == 0
        assert sorted(x for x in log if x.startswith("end")) == ["end s1", "end s2", "end s3", "end s4"]
        assert jobs.running == 0

    asyncio.run(main())


def test_a_full_queue_refuses_the_job_and_a_failing_job_does_not_stop_its_session() -> None:
    async def main() -> None:
        jobs, log = OrderedJobs(max_running=1, max_queued=2), []

        async def broken() -> None:
            raise RuntimeError("bug")

        gate = asyncio.Event()
        assert jobs.submit("s1", broken)
        assert jobs.submit("s1", _job(log, "after", gate))
        assert not jobs.submit("s2", _job(log, "dropped"))  # two waiting already
        await asyncio.sleep(0.01)
        assert jobs.submit("s2", _job(log, "later"))  # room again: one has started
        assert await jobs.join(0.05) == 1  # bounded wait: s2's job still queued behind the gate
        gate.set()
        assert await jobs.join(1) == 0
        assert log == ["start after", "end after", "start later", "end later"]

    asyncio.run(main())


def test_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="max_running"):
        OrderedJobs(max_running=0)
    with pytest.raises(ValueError, match="max_queued"):
        OrderedJobs(max_queued=0)


def test_jobs_run_under_an_eager_task_factory() -> None:
    """mitmproxy's loop starts tasks eagerly: a task runs up to its first wait inside create_task."""

    async def main() -> list[str]:
        asyncio.get_running_loop().set_task_factory(asyncio.eager_task_factory)
        jobs, log = OrderedJobs(), []
        jobs.submit("s1", _job(log, "a1"))
        jobs.submit("s1", _job(log, "a2"))
        assert await jobs.join(1) == 0
        return log

    assert asyncio.run(main()) == ["start a1", "end a1", "start a2", "end a2"]
