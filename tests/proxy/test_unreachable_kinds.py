"""How brownout names an upstream failure (proxy.unreachable) and bounds the metric's host label."""

from __future__ import annotations

import errno
import logging
import socket
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from brownout.core.guard import Guard
from brownout.exporters.upstream_errors import UPSTREAM_ERROR_KINDS, UpstreamErrors
from brownout.proxy.unreachable import Unreachable, kind_of_error, kind_of_message
from tests.proxy.test_unreachable import closed_port
from tests.proxy.test_upstream_errors import DNS_HOST


@pytest.mark.parametrize(
    ("message", "kind"),
    [
        ("[Errno 111] Connect call failed ('127.0.0.1', 9)", "refused"),
        ("[Errno -2] Name or service not known", "dns"),
        ("[Errno -3] Temporary failure in name resolution", "dns"),
        (f"[Errno {errno.ETIMEDOUT}] Connect call failed ('10.0.0.1', 443)", "timeout"),
        (f"[Errno {errno.ENETUNREACH}] Connect call failed ('2001:db8::1', 443, 0, 0)", "unreachable"),
        # localhost: ::1 unreachable, 127.0.0.1 refused: the refusal says more.
        (
            f"Multiple exceptions: [Errno {errno.EADDRNOTAVAIL}] Cannot assign requested address, "
            "[Errno 111] Connect call failed ('127.0.0.1', 9)",
            "refused",
        ),
        ("Connection killed: blocked", "other"),
    ],
)
def test_kind_of_mitmproxys_message(message: str, kind: str) -> None:
    assert kind_of_message(message) == kind


@pytest.mark.parametrize("target", ["refused", "dns"])
def test_kind_of_a_real_httpx_error(target: str) -> None:
    url = f"http://127.0.0.1:{closed_port()}/" if target == "refused" else f"http://{DNS_HOST}/"
    with pytest.raises(httpx.ConnectError) as err:
        httpx.get(url, trust_env=False)
    assert kind_of_error(err.value) == target


def test_every_kind_is_a_label_value() -> None:
    kinds = {kind_of_message(f"[Errno {n}] x") for n in range(-20, 150)} | {"tls"}
    assert kinds <= set(UPSTREAM_ERROR_KINDS)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    return {
        (s.labels["host"], s.labels["kind"]): s.value
        for m in registry.collect()
        if m.name == "brownout_upstream_errors"
        for s in m.samples
        if s.name.endswith("_total")
    }


def test_host_label_is_bounded() -> None:
    registry = CollectorRegistry()
    errors = UpstreamErrors(registry, max_hosts=2)
    for host in ("API.openai.com.", "api.anthropic.com", "random-1.example", "random-2.example", "api.openai.com"):
        errors.observe(host, "dns")
    errors.observe("x" * 300, "refused")
    errors.observe("api.anthropic.com", "gremlins")
    assert _samples(registry) == {
        ("api.openai.com", "dns"): 2,
        ("api.anthropic.com", "dns"): 1,
        ("other", "dns"): 2,
        ("other", "refused"): 1,
        ("api.anthropic.com", "other"): 1,
    }


def test_warns_once_per_host_and_kind_and_stops_warning_at_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="brownout.proxy.unreachable")
    counted: list[tuple[str, str]] = []
    unreachable = Unreachable(
        Guard(strict=True), on_error=lambda host, kind: counted.append((host, kind)), max_logged=2
    )
    for host, kind in [("a", "dns"), ("A", "dns"), ("a", "refused"), ("b", "tls"), ("a", "dns")]:
        unreachable.failed(host, 443, kind, "why")
    assert counted == [("a", "dns"), ("A", "dns"), ("a", "refused"), ("b", "tls"), ("a", "dns")]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert [w.split(" (")[0] for w in warned] == ["cannot reach upstream a:443", "cannot reach upstream a:443"]
    assert "(dns): why. The name does not resolve" in warned[0] and "(refused)" in warned[1]


def test_a_failing_counter_never_reaches_traffic() -> None:
    def broken(host: str, kind: str) -> None:
        raise RuntimeError("exporter bug")

    guard = Guard()
    unreachable = Unreachable(guard, on_error=broken)
    unreachable.relay_failed("api.openai.com", 443, ConnectionRefusedError(errno.ECONNREFUSED, "refused"))
    assert guard.snapshot() == {"upstream": 1}


def test_a_connection_never_tried_or_given_up_is_not_a_failure() -> None:
    counted: list[Any] = []
    unreachable = Unreachable(Guard(strict=True), on_error=lambda host, kind: counted.append(kind))

    class Server:
        address = ("api.openai.com", 443)
        timestamp_start: float | None = None
        error = "Connection killed: blocked by an addon"

    class Data:
        server = Server()

    unreachable.server_connect_error(Data())  # type: ignore[arg-type]
    Server.timestamp_start, Server.error = 1.0, "connection cancelled"
    unreachable.server_connect_error(Data())  # type: ignore[arg-type]
    Server.error = f"[Errno {socket.EAI_NONAME}] Name or service not known"
    unreachable.server_connect_error(Data())  # type: ignore[arg-type]
    assert counted == ["dns"]
