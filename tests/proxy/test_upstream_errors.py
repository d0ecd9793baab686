"""Upstreams brownout cannot reach: every failure counted by host and kind, the first of each warned
about with its cause; a host in proxy.ignore_hosts fails the way every other host does."""

from __future__ import annotations

import logging
import ssl
import time
from typing import Any

import httpx2  # the openai SDK's HTTP client
import openai
import pytest

from brownout.proxy.embed import ProxyHandle
from tests.proxy.test_unreachable import closed_port

MESSAGES = [{"role": "user", "content": "hi"}]
DNS_HOST = "no-such-upstream.invalid"  # RFC 6761: never resolves
WARNS = "brownout.proxy.unreachable"


def chat(base_url: str, proxy: ProxyHandle | None) -> openai.APIError:
    """One chat call, directly (proxy None: a plain-HTTP base URL) or through `proxy`; its error."""
    http = (
        openai.DefaultHttpxClient(trust_env=False)
        if proxy is None
        else openai.DefaultHttpxClient(
            proxy=proxy.proxy_url(), verify=ssl.create_default_context(cafile=str(proxy.ca_bundle_path))
        )
    )
    client = openai.OpenAI(base_url=base_url, api_key="sk-test", max_retries=0, http_client=http)
    with pytest.raises(openai.APIError) as err:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)  # type: ignore[arg-type]
    return err.value


def upstream_errors(proxy: ProxyHandle, expected: int, timeout_s: float = 5.0) -> dict[tuple[str, str], float]:
    """brownout_upstream_errors_total by (host, kind), once `expected` failures are counted."""
    registry = proxy.addon.pipeline.exporters.metrics.registry

    def read() -> dict[tuple[str, str], float]:
        return {
            (s.labels["host"], s.labels["kind"]): s.value
            for m in registry.collect()
            if m.name == "brownout_upstream_errors"
            for s in m.samples
            if s.name == "brownout_upstream_errors_total"
        }

    deadline = time.monotonic() + timeout_s
    while sum(read().values()) < expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return read()


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == WARNS and r.levelno == logging.WARNING]


@pytest.mark.parametrize("kind", ["refused", "dns", "tls"])
def test_each_failure_is_counted_and_the_first_is_warned_about(
    brownout_proxy: Any, upstream_tls: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.WARNING, logger=WARNS)
    proxy = brownout_proxy()  # upstream_tls's CA is not trusted: a real certificate verification failure
    url, host, cause = {
        "refused": (f"http://127.0.0.1:{closed_port()}/v1", "127.0.0.1", "Connect call failed"),
        "dns": (f"http://{DNS_HOST}/v1", DNS_HOST, "[Errno "),
        "tls": (f"{upstream_tls.url}/v1", "127.0.0.1", "Certificate verify failed"),
    }[kind]
    for _ in range(3):
        assert type(chat(url, proxy)) is openai.APIConnectionError
    assert upstream_errors(proxy, 3) == {(host, kind): 3}
    (warning,) = warnings(caplog)
    assert f"cannot reach upstream {host}:" in warning and f"({kind})" in warning and cause in warning, warning
    assert "brownout_upstream_errors_total" in warning


def test_a_tls_failure_says_how_to_trust_a_private_ca(
    brownout_proxy: Any, upstream_tls: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=WARNS)
    proxy = brownout_proxy(mode=f"reverse:{upstream_tls.url}")
    assert type(chat(f"{proxy.url}/v1", None)) is openai.APIConnectionError
    assert upstream_errors(proxy, 1) == {("127.0.0.1", "tls"): 1}
    (warning,) = warnings(caplog)
    assert "--set ssl_verify_upstream_trusted_ca=" in warning, warning


@pytest.mark.parametrize("kind", ["refused", "tls"])
def test_failures_behind_the_pacing_relay_are_counted_once(
    brownout_proxy: Any, upstream_tls: Any, caplog: pytest.LogCaptureFixture, kind: str
) -> None:
    caplog.set_level(logging.WARNING, logger=WARNS)
    proxy = brownout_proxy("rules:\n  - {name: slow, match: {}, fault: {type: stall, after_events: 1, pause_ms: 50}}\n")
    url = f"http://127.0.0.1:{closed_port()}/v1" if kind == "refused" else f"{upstream_tls.url}/v1"
    for _ in range(2):
        assert type(chat(url, proxy)) is openai.APIConnectionError
    assert upstream_errors(proxy, 2) == {("127.0.0.1", kind): 2}
    time.sleep(0.2)  # nothing else arrives late (mitmproxy's own connection is to the relay, which works)
    assert upstream_errors(proxy, 2) == {("127.0.0.1", kind): 2}
    assert len(warnings(caplog)) == 1


@pytest.mark.parametrize("scheme", ["http", "https"])
@pytest.mark.parametrize("setting", ["drop", "'502'"])
def test_an_ignored_host_fails_the_way_every_other_host_does(brownout_proxy: Any, scheme: str, setting: str) -> None:
    proxy = brownout_proxy(f"proxy: {{ignore_hosts: [localhost], upstream_error: {setting}}}\n")
    port = closed_port()
    handled = chat(f"{scheme}://127.0.0.1:{port}/v1", proxy)
    ignored = chat(f"{scheme}://localhost:{port}/v1", proxy)
    if setting == "drop":  # not mitmproxy's HTML 502 page, which the SDK would retry as a server error
        assert type(ignored) is type(handled) is openai.APIConnectionError, ignored
        # Both connections are reset. An ignored host's request streams, so the reset can land while
        # the client still writes its body: httpx then reads the end of the connection instead.
        assert isinstance(handled.__cause__, httpx2.ReadError), repr(handled.__cause__)
        assert isinstance(ignored.__cause__, (httpx2.ReadError, httpx2.RemoteProtocolError)), repr(ignored.__cause__)
    else:
        assert isinstance(ignored, openai.InternalServerError) and isinstance(handled, openai.InternalServerError)
        assert ignored.status_code == handled.status_code == 502
    # An ignored host's failure is a failure all the same: counted (and warned about) like any other.
    assert upstream_errors(proxy, 2) == {("127.0.0.1", "refused"): 1, ("localhost", "refused"): 1}


def test_a_refused_reverse_target_is_warned_about_once_per_kind(
    brownout_proxy: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=WARNS)
    port = closed_port()
    proxy = brownout_proxy(mode=f"reverse:http://127.0.0.1:{port}")
    for _ in range(4):
        assert type(chat(f"{proxy.url}/v1", None)) is openai.APIConnectionError
    assert upstream_errors(proxy, 4) == {("127.0.0.1", "refused"): 4}
    (warning,) = warnings(caplog)
    assert f"cannot reach upstream 127.0.0.1:{port} (refused)" in warning and "is the server up" in warning
