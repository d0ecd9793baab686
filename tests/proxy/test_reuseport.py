"""SO_REUSEPORT on mitmproxy's listener (proxy/reuseport.py): two real brownout proxies on one port.

The override reaches into mitmproxy 12.2's server start-up (the `changed` signal of the proxyserver's
servers, fired before each new instance listens); a mitmproxy that changes that order fails here.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.embed import ProxyHandle, ProxyStartError, running_proxy
from brownout.proxy.reuseport import hold_port
from tests.cli.helpers import free_port


@pytest.fixture
def proxies(tmp_path: Path, _ca_template: Path) -> Iterator[Any]:
    """Factory: a real brownout proxy on 127.0.0.1:`port`, stopped at teardown."""
    with contextlib.ExitStack() as stack:

        def start(port: int, *, reuse_port: bool) -> ProxyHandle:
            confdir = tmp_path / f"confdir-{len(stack._exit_callbacks)}"
            shutil.copytree(_ca_template, confdir)
            return stack.enter_context(
                running_proxy(
                    listen=f"127.0.0.1:{port}",
                    confdir=confdir,
                    reuse_port=reuse_port,
                    extra_options={"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"},
                )
            )

        yield start


def _exchanges(handle: ProxyHandle) -> int:
    def count() -> int:  # on the proxy's loop, which completes first the exchanges it has answered
        counter = handle.addon.pipeline.exporters.metrics.requests
        return int(sum(s.value for m in counter.collect() for s in m.samples if s.name.endswith("_total")))

    return handle.call(count)


def test_two_proxies_share_one_port_and_both_serve(proxies: Any, upstream: Any) -> None:
    port = free_port()
    first, second = proxies(port, reuse_port=True), proxies(port, reuse_port=True)
    assert first.port == second.port == port
    for i in range(40):  # a connection each: the kernel spreads connections, not requests
        with httpx.Client(proxy=first.url, trust_env=False) as client:
            assert client.get(f"{upstream.url}/tools/weather?city=c{i}").status_code == 200
    served = _exchanges(first), _exchanges(second)
    assert sum(served) == 40 and min(served) > 0, served


def test_without_reuse_port_a_second_proxy_cannot_listen(proxies: Any) -> None:
    port = free_port()
    proxies(port, reuse_port=True)
    with pytest.raises(ProxyStartError) as e:
        proxies(port, reuse_port=False)  # the default: mitmproxy's own listen, unchanged
    assert e.value.address_in_use == f"127.0.0.1:{port}"


def test_a_held_port_takes_shared_listeners_and_no_connection(proxies: Any, upstream: Any) -> None:
    held = hold_port("127.0.0.1", 0)
    with held:
        port = held.getsockname()[1]
        assert port != 0
        proxy = proxies(port, reuse_port=True)
        for i in range(10):
            with httpx.Client(proxy=proxy.url, trust_env=False) as client:
                assert client.get(f"{upstream.url}/tools/weather?city=c{i}").status_code == 200
        assert _exchanges(proxy) == 10


def test_hold_port_refuses_a_port_another_program_listens_on() -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        with pytest.raises(OSError, match="in use"):
            hold_port("127.0.0.1", other.getsockname()[1]).close()
    # One that listens with SO_REUSEPORT itself is another program too: never share its traffic.
    with socket.create_server(("127.0.0.1", 0), reuse_port=True) as other:
        with pytest.raises(OSError, match="in use"):
            hold_port("127.0.0.1", other.getsockname()[1]).close()
