"""Helpers for record/replay tests: proxies that record or replay, waiting for the cassette writer."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from brownout.proxy.embed import ProxyHandle
from brownout.proxy.record.cassette import Cassette, read_dir


def recorder(
    brownout_proxy: Callable[..., ProxyHandle], cassettes: Path, config: str = "seed: 1\n", **kwargs: Any
) -> ProxyHandle:
    """A proxy recording into `cassettes`."""
    options = {"brownout_record": str(cassettes), **kwargs.pop("extra_options", {})}
    return brownout_proxy(config, extra_options=options, **kwargs)


def player(
    brownout_proxy: Callable[..., ProxyHandle],
    cassettes: Path,
    config: str = "seed: 1\n",
    *,
    speed: float | None = None,
    miss: str | None = None,
    **kwargs: Any,
) -> ProxyHandle:
    """A proxy replaying from `cassettes`."""
    options = {"brownout_replay": str(cassettes), **kwargs.pop("extra_options", {})}
    if speed is not None:
        options["brownout_replay_speed"] = repr(speed)
    if miss is not None:
        options["brownout_replay_miss"] = miss
    return brownout_proxy(config, extra_options=options, **kwargs)


def wait_recorded(proxy: ProxyHandle, n: int, timeout_s: float = 10.0) -> None:
    """Until `n` exchanges are written (the exchange finishes just after the client has its answer)."""
    writer = proxy.addon.tape.writer
    assert writer is not None, "the proxy is not recording"
    deadline = time.monotonic() + timeout_s
    while writer.written < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert writer.written >= n, f"{writer.written} exchanges recorded, expected {n} (dropped {writer.dropped})"
    assert writer.flush(timeout_s)


def load(cassettes: Path) -> list[Cassette]:
    return list(read_dir(cassettes))


@contextmanager
def mock_upstream(tls: bool = False) -> Iterator[Any]:
    """A demo MockUpstream that is gone after the block: replay must not need it."""
    from brownout.proxy.demo.upstream import MockUpstream

    with MockUpstream.run_in_thread(tls=tls) as up:
        yield up


def wait_exchanges(exchanges: list[Any], n: int, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(exchanges) < n and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(exchanges) >= n, f"{len(exchanges)} exchanges finished, expected {n}"
