"""Bookkeeping that yields to traffic (proxy/idlework.py), on a real asyncio event loop and real sockets."""

from __future__ import annotations

import asyncio
import socket
import time

from brownout.proxy.idlework import IDLE_S, MAX_S, IdleWork


async def _waiting_io_goes_before_queued_work() -> None:
    """The client's next request (readable data) is handled before the last exchange's bookkeeping."""
    loop = asyncio.get_running_loop()
    work = IdleWork.of(loop)
    assert work is not None
    order: list[str] = []
    a, b = socket.socketpair()
    a.setblocking(False)
    got = asyncio.Event()

    def readable() -> None:
        a.recv(100)
        order.append("request")
        got.set()

    loop.add_reader(a.fileno(), readable)
    try:
        work.add(order.append, "bookkeeping")
        b.send(b"GET / HTTP/1.1\r\n\r\n")  # arrives while the work waits
        await got.wait()
        while len(work):
            await asyncio.sleep(0.001)
        assert order == ["request", "bookkeeping"]
    finally:
        loop.remove_reader(a.fileno())
        a.close()
        b.close()


async def _work_waits_for_an_idle_moment_not_the_next_turn() -> None:
    loop = asyncio.get_running_loop()
    work = IdleWork.of(loop)
    assert work is not None
    done: list[int] = []
    work.add(done.append, 1)
    await asyncio.sleep(0)  # a turn with a callback ready: the loop is not idle
    assert done == []
    start = time.monotonic()
    while not done:
        await asyncio.sleep(0.0005)
    assert done == [1]
    assert time.monotonic() - start < MAX_S * 5  # a quiet loop runs it after about IDLE_S


async def _a_loop_that_never_idles_still_runs_work_within_max_s() -> None:
    loop = asyncio.get_running_loop()
    work = IdleWork.of(loop)
    assert work is not None
    ran_at: list[float] = []
    start = time.monotonic()
    work.add(lambda: ran_at.append(time.monotonic()))
    while time.monotonic() - start < MAX_S * 4:  # busy: a callback is always ready
        await asyncio.sleep(0)
    assert ran_at, "work starved by a busy loop"
    assert ran_at[0] - start >= MAX_S * 0.9


async def _order_failures_and_one_queue_per_loop() -> None:
    loop = asyncio.get_running_loop()
    work = IdleWork.of(loop)
    assert work is not None and IdleWork.of(loop) is work  # a second proxy on the loop shares it
    seen: list[object] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context["exception"]))
    try:
        out: list[int] = []

        def boom() -> None:
            raise ValueError("a failing consumer")

        work.add(out.append, 1)
        work.add(boom)
        work.add(out.append, 2)
        deadline = time.monotonic() + 2
        while len(work) and time.monotonic() < deadline:
            await asyncio.sleep(IDLE_S)
        assert out == [1, 2]
        assert len(seen) == 1 and isinstance(seen[0], ValueError)
    finally:
        loop.set_exception_handler(None)


async def _run_now_takes_only_the_owners_items_in_order() -> None:
    work = IdleWork.of(asyncio.get_running_loop())
    assert work is not None
    out: list[str] = []
    mine, theirs = (lambda x: out.append(f"mine {x}")), (lambda x: out.append(f"theirs {x}"))
    work.add(mine, 1)
    work.add(theirs, 1)
    work.add(mine, 2)
    work.run_now(lambda item: item[1] is mine)
    assert out == ["mine 1", "mine 2"] and len(work) == 1
    while len(work):
        await asyncio.sleep(IDLE_S)
    assert out[-1] == "theirs 1"


def test_a_loop_without_a_selector_gets_none() -> None:
    """Another event loop implementation: the caller falls back to call_soon (Pipeline.complete_later)."""

    class Loop:
        pass

    assert IdleWork.of(Loop()) is None  # type: ignore[arg-type]


def test_waiting_io_goes_before_queued_work() -> None:
    asyncio.run(_waiting_io_goes_before_queued_work())


def test_work_waits_for_an_idle_moment_not_the_next_turn() -> None:
    asyncio.run(_work_waits_for_an_idle_moment_not_the_next_turn())


def test_a_loop_that_never_idles_still_runs_work_within_max_s() -> None:
    asyncio.run(_a_loop_that_never_idles_still_runs_work_within_max_s())


def test_order_failures_and_one_queue_per_loop() -> None:
    asyncio.run(_order_failures_and_one_queue_per_loop())


def test_run_now_takes_only_the_owners_items_in_order() -> None:
    asyncio.run(_run_now_takes_only_the_owners_items_in_order())


def test_a_call_from_another_thread_sees_what_the_loop_has_answered() -> None:
    """LoopRunner's `before` runs on the loop ahead of the callable (the proxy completes pending exchanges)."""
    import threading

    from brownout.proxy.onloop import LoopRunner

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        done: list[str] = []
        runner = LoopRunner(loop, before=lambda: done.append("completed"))
        assert runner.call(lambda: list(done)) == ["completed"]
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
