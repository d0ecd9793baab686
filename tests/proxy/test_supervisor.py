"""The worker supervisor's policy (proxy/workers/supervisor.py) with real processes that act as workers
on its channel: ready, crash, fail to start, stop on SIGTERM. (tests/cli/test_workers.py runs real
brownout workers; these are quick and can crash on cue.)"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.workers.spec import WorkerSpec
from brownout.proxy.workers.supervisor import Supervisor, WorkerStartError

FAKE_WORKER = """#!{python}
import json, os, signal, socket, sys, time
spec = json.loads(sys.argv[-1])
how = dict(o.split("=", 1) for o in spec["options"])
channel = socket.socket(fileno=spec["channel_fd"])
if how.get("start") == "fail":
    sys.exit(2)


def stop(*_):
    channel.sendall(b'{{"event": "stopped", "counts": {{"exchanges": {{"openai": {{"chat": 2}}}}}}}}\\n')
    sys.exit(0)

signal.signal(signal.SIGTERM, stop)  # as a real worker: handled from before it says it is ready
channel.sendall(json.dumps({{"event": "ready", "pid": os.getpid(), "metrics_url": None, "control_url": None}}).encode() + b"\\n")
if "crash_after" in how:
    time.sleep(float(how["crash_after"]))
    os._exit(3)
while channel.recv(1):
    pass
"""


@pytest.fixture
def fake_python(tmp_path: Path) -> str:
    path = tmp_path / "fake-worker"
    path.write_text(FAKE_WORKER.format(python=sys.executable))
    path.chmod(0o755)
    return str(path)


def _supervisor(fake_python: str, behaviours: list[str], **kwargs: Any) -> Supervisor:
    def spec_for(index: int) -> WorkerSpec:
        return WorkerSpec(index, "127.0.0.1:1", options=[behaviours[index]] if behaviours[index] else [])

    return Supervisor(len(behaviours), spec_for, python=fake_python, backoff_s=0.01, **kwargs)


def test_start_then_stop_collects_every_workers_counts(fake_python: str) -> None:
    async def main() -> Supervisor:
        supervisor = _supervisor(fake_python, ["", ""])
        await supervisor.start()
        assert [w.alive for w in supervisor.workers()] == [True, True]
        assert len({w.pid for w in supervisor.workers()}) == 2
        await supervisor.stop(timeout_s=10)
        return supervisor

    supervisor = asyncio.run(main())
    assert supervisor.exit_codes == {0: 0, 1: 0}
    assert supervisor.counts == [{"exchanges": {"openai": {"chat": 2}}}] * 2
    assert not any(w.alive for w in supervisor.workers())


def test_a_worker_that_dies_is_restarted_until_it_dies_too_often(fake_python: str) -> None:
    async def main() -> Supervisor:
        supervisor = _supervisor(fake_python, ["crash_after=0.3", ""], max_restarts=2, restart_window_s=60)
        await supervisor.start()
        first = supervisor.workers()[0].pid
        await asyncio.sleep(0.1)
        assert supervisor.workers()[0].pid == first
        deadline = asyncio.get_running_loop().time() + 30
        while not supervisor._slots[0].given_up:
            assert asyncio.get_running_loop().time() < deadline, supervisor.workers()
            await asyncio.sleep(0.05)
        assert not supervisor.all_gone.is_set()  # worker 1 still serves
        await supervisor.stop(timeout_s=10)
        return supervisor

    supervisor = asyncio.run(main())
    zero, one = supervisor.workers()
    assert zero.restarts == 2 and one.restarts == 0  # died 3 times: restarted twice, then given up
    assert supervisor.exit_codes == {1: 0}  # worker 0 was not running at the stop


def test_when_every_worker_is_given_up_the_fleet_is_gone(fake_python: str) -> None:
    async def main() -> Supervisor:
        supervisor = _supervisor(fake_python, ["crash_after=0.2"], max_restarts=1)
        await supervisor.start()
        await asyncio.wait_for(supervisor.all_gone.wait(), timeout=30)
        await supervisor.stop(timeout_s=10)
        return supervisor

    assert asyncio.run(main()).workers()[0].restarts == 1


def test_a_worker_that_fails_to_start_stops_the_fleet_without_a_restart(fake_python: str) -> None:
    async def main() -> Supervisor:
        supervisor = _supervisor(fake_python, ["", "start=fail"])
        with pytest.raises(WorkerStartError, match="worker 1 exited with exit code 2 before it listened"):
            await supervisor.start()
        return supervisor

    supervisor = asyncio.run(main())
    assert supervisor.exit_codes == {0: 0, 1: 2}  # the other one was stopped, cleanly
    assert [w.restarts for w in supervisor.workers()] == [0, 0]
