"""brownout's mitmproxy master: mitmproxy's dispatch semantics from a per-hook handler list."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from mitmproxy import addons, exceptions, options
from mitmproxy.proxy.layers.http import HttpRequestHook, HttpResponseHook
from mitmproxy.test import tflow

from brownout.proxy.master import PROXY_CORE, BrownoutMaster


class Recorder:
    """An addon that records the hooks it sees, under its own name."""

    def __init__(self, name: str, calls: list[str], sub: list[Any] | None = None) -> None:
        self.name, self.calls = name, calls
        if sub is not None:
            self.addons = sub

    def request(self, flow: Any) -> None:
        self.calls.append(f"{self.name}.request")


class AsyncRecorder(Recorder):
    async def response(self, flow: Any) -> None:
        await asyncio.sleep(0)
        self.calls.append(f"{self.name}.response")


class Raises(Recorder):
    def request(self, flow: Any) -> None:
        self.calls.append(f"{self.name}.request")
        raise ValueError("addon bug")


class Halts(Recorder):
    def request(self, flow: Any) -> None:
        self.calls.append(f"{self.name}.request")
        raise exceptions.AddonHalt


async def _master() -> BrownoutMaster:
    return BrownoutMaster(options.Options())


def test_loads_the_proxy_core_only_and_keeps_its_options() -> None:
    async def run() -> None:
        master = await _master()
        loaded = {type(a) for a in master.addons.chain}
        assert set(PROXY_CORE) <= loaded
        # Built from PROXY_CORE, which must list them as mitmproxy's own default addons do.
        assert list(PROXY_CORE) == [type(a) for a in addons.default_addons() if type(a) in PROXY_CORE]
        assert master.addons.get("script") is None and master.addons.get("save") is None
        for option in ("proxyauth", "allow_hosts", "ignore_hosts", "block_global", "upstream_auth", "ssl_insecure"):
            assert option in master.options, option
        assert "modify_headers" not in master.options and "scripts" not in master.options

    asyncio.run(run())


def test_order_sub_addons_sync_and_async_handlers() -> None:
    async def run() -> None:
        master, calls = await _master(), []
        master.addons.add(Recorder("a", calls, sub=[AsyncRecorder("a_child", calls)]), AsyncRecorder("b", calls))
        flow = tflow.tflow(resp=True)
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        await master.addons.handle_lifecycle(HttpResponseHook(flow))
        assert calls == ["a.request", "a_child.request", "b.request", "a_child.response", "b.response"]

    asyncio.run(run())


def test_an_addon_added_after_the_first_event_is_dispatched_to_and_a_removed_one_is_not() -> None:
    async def run() -> None:
        master, calls = await _master(), []
        first = Recorder("first", calls)
        master.addons.add(first)
        flow = tflow.tflow()
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        master.addons.add(Recorder("late", calls))
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        master.addons.remove(first)
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        assert calls == ["first.request", "first.request", "late.request", "late.request"]

    asyncio.run(run())


def test_an_instance_that_replaces_its_handler_later_is_called_through_the_new_one() -> None:
    async def run() -> None:
        master, calls = await _master(), []
        addon = Recorder("r", calls)
        master.addons.add(addon)
        flow = tflow.tflow()
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        addon.request = lambda f: calls.append("patched")  # type: ignore[method-assign]
        await master.addons.handle_lifecycle(HttpRequestHook(flow))
        assert calls == ["r.request", "patched"]

    asyncio.run(run())


def test_an_error_is_logged_and_the_next_addon_still_runs_but_not_the_failing_ones_children(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def run() -> None:
        master, calls = await _master(), []
        master.addons.add(Raises("bad", calls, sub=[Recorder("bad_child", calls)]), Recorder("next", calls))
        with caplog.at_level(logging.ERROR):
            await master.addons.handle_lifecycle(HttpRequestHook(tflow.tflow()))
        assert calls == ["bad.request", "next.request"]
        assert "addon bug" in caplog.text

    asyncio.run(run())


def test_addon_halt_stops_the_event() -> None:
    async def run() -> None:
        master, calls = await _master(), []
        master.addons.add(Halts("halt", calls), Recorder("after", calls))
        await master.addons.handle_lifecycle(HttpRequestHook(tflow.tflow()))
        assert calls == ["halt.request"]

    asyncio.run(run())
