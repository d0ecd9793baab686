"""brownout.proxy.embed: the in-process proxy every other test builds on."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from brownout.proxy.configload import ConfigError
from brownout.proxy.embed import ProxyStartError, running_proxy, running_proxy_async
from tests.proxy.test_passthrough import wait_for

# /metrics and the control API on free ports: their defaults (9464, 9465) may be taken by a brownout
# already running on the machine, or by a test on another worker.
FREE_ENDPOINTS = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}


def test_regular_mode_https_and_handle(upstream_tls: Any, brownout_proxy: Callable[..., Any]) -> None:
    proxy = brownout_proxy(upstream=upstream_tls)
    assert proxy.url == f"http://127.0.0.1:{proxy.port}"
    assert proxy.env["HTTPS_PROXY"] == proxy.url
    assert proxy.addon is not None and proxy.master is not None
    with httpx.Client(
        proxy=proxy.url, verify=ssl.create_default_context(cafile=str(proxy.ca_bundle_path)), trust_env=False
    ) as client:
        assert client.get(f"{upstream_tls.url}/tools/weather?city=Oslo").json()["city"] == "Oslo"


def test_reverse_mode(upstream: Any, brownout_proxy: Callable[..., Any]) -> None:
    proxy = brownout_proxy(mode="reverse", upstream=upstream)
    r = httpx.get(f"{proxy.url}/tools/weather?city=Rome", trust_env=False)
    assert r.json()["city"] == "Rome"


def test_config_text_is_applied(upstream: Any, brownout_proxy: Callable[..., Any]) -> None:
    cfg = "rules:\n  - name: down\n    match: {path: /tools/weather}\n    fault: {type: http_error, status: 503}\n"
    proxy = brownout_proxy(cfg, upstream=upstream)
    with httpx.Client(proxy=proxy.url, trust_env=False) as client:
        assert client.get(f"{upstream.url}/tools/weather?city=Rome").status_code == 503


def test_bad_config_file_raises_config_error(tmp_path: Path, confdir: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: nope\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:1: seed"), running_proxy(bad, confdir=confdir):
        pass


def test_port_in_use_raises_instead_of_exiting(confdir: Path, taken_port: int) -> None:
    with pytest.raises(ProxyStartError, match="address already in use"):
        with running_proxy(listen=f"127.0.0.1:{taken_port}", confdir=confdir):
            pass


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"no_such_option": 1}, "unknown"),
        (["ssl_insecure=maybe"], "ssl_insecure"),
        (["modify_headers=/~q/x-a/b"], "unknown mitmproxy option 'modify_headers'.*run brownout inside mitmdump"),
    ],
)
def test_bad_options(confdir: Path, options: Any, message: str) -> None:
    with pytest.raises(ProxyStartError, match=message), running_proxy(confdir=confdir, extra_options=options):
        pass


def test_string_options_are_parsed_like_set(confdir: Path) -> None:
    options = {"ssl_insecure": "true", "allow_hosts": "example", **FREE_ENDPOINTS}
    with running_proxy(confdir=confdir, extra_options=options) as proxy:
        assert proxy.master.options.ssl_insecure is True
        assert proxy.master.options.allow_hosts == ["example"]


def test_stop_frees_the_port(confdir: Path) -> None:
    with running_proxy(confdir=confdir, extra_options=FREE_ENDPOINTS) as proxy:
        port = proxy.port
    with running_proxy(listen=f"127.0.0.1:{port}", confdir=confdir, extra_options=FREE_ENDPOINTS) as again:
        assert again.port == port


def test_two_proxies_running_in_one_process_each_handle_their_own_traffic(
    upstream: Any, brownout_proxy: Callable[..., Any]
) -> None:
    """mitmproxy hands every accepted connection to its process-global `ctx.master`; brownout makes
    that per event loop, so the first proxy keeps its own traffic, config and callbacks after a
    second one starts."""
    seen_a: list[Any] = []
    seen_b: list[Any] = []
    chaos = "rules:\n  - name: down\n    fault: {type: http_error, status: 503}\n"
    a = brownout_proxy(chaos, on_exchange=seen_a.append)
    b = brownout_proxy(on_exchange=seen_b.append)
    url = f"{upstream.url}/tools/weather?city=Oslo"
    for _ in range(3):
        with httpx.Client(proxy=a.proxy_url(), trust_env=False) as client:
            assert client.get(url).status_code == 503
        with httpx.Client(proxy=b.proxy_url(), trust_env=False) as client:
            assert client.get(url).status_code == 200
    wait_for(seen_a, 3)
    wait_for(seen_b, 3)
    assert [len(e.faults) for e in seen_a] == [1, 1, 1] and [len(e.faults) for e in seen_b] == [0, 0, 0]


def test_the_control_api_reloads_its_own_proxy_when_two_run_in_one_process(
    upstream: Any, brownout_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    """POST /reload runs on the control API's thread, where mitmproxy's `ctx.options` answers for the
    proxy created last: each proxy must reload its own file."""

    def chaos(status: int, token: str) -> str:
        rules = f"  - {{name: down, match: {{path: /tools/*}}, fault: {{type: http_error, status: {status}}}}}\n"
        return f"version: 1\nrules:\n{rules}control: {{token: {token}}}\n"

    path_a, path_b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    path_a.write_text(chaos(503, "token-a"))
    path_b.write_text(chaos(504, "token-b"))
    no_watcher = {"brownout_reload_s": 0}
    a = brownout_proxy(path_a, extra_options=no_watcher)
    b = brownout_proxy(path_b, extra_options=no_watcher)  # created last: ctx.options is b's off the loop

    def status(proxy: Any) -> int:
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, timeout=10) as client:
            return client.get(f"{upstream.url}/tools/weather?city=Oslo").status_code

    assert (status(a), status(b)) == (503, 504)
    path_a.write_text(chaos(502, "token-a"))
    path_b.write_text(chaos(500, "token-b"))  # b's file changed too, but nobody reloads b
    r = httpx.post(
        f"http://127.0.0.1:{a.addon.control.port}/reload", headers={"Authorization": "Bearer token-a"}, timeout=10
    )
    assert r.status_code == 200 and r.json()["message"].startswith(f"reloaded {path_a}"), r.text
    assert (status(a), status(b)) == (502, 504)


def test_a_second_proxy_on_the_same_loop_is_warned_about(confdir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Two proxies on one event loop share mitmproxy's per-loop master: starting the second says so."""

    async def two() -> None:
        async with running_proxy_async(confdir=confdir, extra_options=FREE_ENDPOINTS):
            assert not [r for r in caplog.records if "another mitmproxy master" in r.getMessage()]
            async with running_proxy_async(confdir=confdir, extra_options=FREE_ENDPOINTS):
                pass

    with caplog.at_level(logging.WARNING, logger="brownout.proxy.embed"):
        asyncio.run(two())
    (warning,) = [r for r in caplog.records if "another mitmproxy master" in r.getMessage()]
    assert "on a loop of its own" in warning.getMessage()
