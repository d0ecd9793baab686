"""proxy/freeport.py: a port picked below the kernel's ephemeral range (where no bind to port 0 and no
outgoing connection can take it), free when picked; the kernel's pick where the range is unknown."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from brownout.proxy import freeport
from brownout.proxy.freeport import PICK_FROM, ephemeral_low, free_port


def _bind(port: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    low = ephemeral_low()
    assert low is not None, "this suite runs on Linux, where the range is readable"
    ports = {free_port() for _ in range(20)}
    assert all(PICK_FROM <= p < low for p in ports), ports
    assert len(ports) > 1  # picked at random, not one port for everyone
    for port in ports:
        _bind(port)


def test_a_port_something_listens_on_is_never_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    held = socket.create_server(("127.0.0.1", free_port()))
    taken = held.getsockname()[1]
    other = free_port()
    picks = iter([taken, taken, other])
    monkeypatch.setattr(freeport._PICK, "randrange", lambda a, b: next(picks))
    with held:
        assert free_port() == other


def test_where_the_range_cannot_be_read_the_kernel_picks(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    real_low = ephemeral_low()
    monkeypatch.setattr(freeport, "_RANGE", tmp_path / "absent")
    assert ephemeral_low() is None
    port = free_port()
    assert real_low is not None and port >= real_low  # the kernel hands out its ephemeral ports
    _bind(port)


def test_an_ipv6_host_gets_an_ipv6_port() -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    try:
        port = free_port("::1")
    except OSError as e:
        pytest.skip(f"no IPv6 loopback here: {e}")
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", port))
