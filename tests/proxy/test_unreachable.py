"""An upstream that gives no response: the agent sees the connection fail, as it would without brownout."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import openai
import pytest
from pydantic import ValidationError

from brownout.proxy.config import ProxySettings
from brownout.proxy.freeport import free_port as closed_port  # below the ephemeral range: nothing binds it by chance
from tests.reliability.badinput import h2_first_context
from tests.reliability.rawupstream import RawUpstream, chunked, routes

MESSAGES = [{"role": "user", "content": "hi"}]


def chat(base_url: str, proxy: Any) -> BaseException:
    client = openai.OpenAI(
        base_url=base_url,
        api_key="sk-test",
        max_retries=0,
        http_client=openai.DefaultHttpxClient(proxy=proxy.url if proxy else None, trust_env=False),
    )
    with pytest.raises(openai.APIError) as err:
        client.chat.completions.create(model="gpt-4o-mini", messages=MESSAGES)
    return err.value


def until(pred: Any, timeout_s: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and not pred():
        time.sleep(0.02)
    return bool(pred())


def test_refused_upstream_is_a_connection_error_not_a_502(brownout_proxy: Any) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(on_exchange=seen.append)
    url = f"http://127.0.0.1:{closed_port()}/v1"
    direct, proxied = chat(url, None), chat(url, proxy)
    assert type(direct) is openai.APIConnectionError
    assert type(proxied) is openai.APIConnectionError, proxied  # not InternalServerError from a 502 page
    assert until(lambda: len(seen) == 1)
    assert (seen[0].status, seen[0].error_type) == (None, "connection") and seen[0].error_message


def test_upstream_hanging_up_unanswered_is_the_same_disconnect(brownout_proxy: Any) -> None:
    async def hang_up(req: Any, reader: Any, writer: Any) -> bool:
        writer.transport.close()
        return False

    proxy = brownout_proxy()
    with RawUpstream(hang_up).running() as up:
        direct, proxied = chat(f"{up.url}/v1", None), chat(f"{up.url}/v1", proxy)
    assert type(direct) is type(proxied) is openai.APIConnectionError
    assert repr(proxied.__cause__) == repr(direct.__cause__)  # "Server disconnected without sending a response."


@pytest.mark.parametrize("setting", ["502", "'502'"])
def test_upstream_error_502_keeps_mitmproxys_answer(brownout_proxy: Any, setting: str) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(f"proxy: {{upstream_error: {setting}}}\n", on_exchange=seen.append)
    proxied = chat(f"http://127.0.0.1:{closed_port()}/v1", proxy)
    assert type(proxied) is openai.InternalServerError and proxied.status_code == 502
    assert until(lambda: len(seen) == 1)
    assert (seen[0].status, seen[0].error_type) == (502, None) and seen[0].error_message


def test_upstream_error_setting_is_validated() -> None:
    assert ProxySettings().upstream_error == "drop"
    assert ProxySettings(upstream_error=502).upstream_error == "502"
    with pytest.raises(ValidationError, match="upstream_error"):
        ProxySettings(upstream_error="close")


@pytest.mark.timeout(30)
def test_refused_upstream_resets_only_that_http2_stream(brownout_proxy: Any) -> None:
    async def slow(req: Any, reader: Any, writer: Any) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        for i in range(5):
            writer.write(chunked(f"data: {i}\n\n".encode(), end=i == 4))
            await writer.drain()
            await asyncio.sleep(0.1)
        return True

    up = RawUpstream(routes({"/slow": slow}), tls=True)
    with up.running():
        proxy = brownout_proxy(upstream=up)
        out: dict[str, Any] = {}
        verify = h2_first_context(proxy.ca_bundle_path)
        with httpx.Client(proxy=proxy.proxy_url(), trust_env=False, verify=verify, http2=True, timeout=5) as client:

            def stream() -> None:
                with client.stream("GET", f"{up.url}/slow") as s:
                    out["version"], out["body"] = s.http_version, b"".join(s.iter_raw())

            t = threading.Thread(target=stream)
            t.start()
            assert until(lambda: up.stats.open == 1)
            up.stop_listening()  # the next upstream connection is refused; the open one streams on
            with pytest.raises(httpx.RemoteProtocolError):  # this stream is reset, not answered with a 502
                client.get(f"{up.url}/slow")
            t.join()
    assert out.get("version") == "HTTP/2" and out["body"].count(b"data:") == 5, out


def test_refused_upstream_behind_the_pacing_relay(brownout_proxy: Any) -> None:
    seen: list[Any] = []
    proxy = brownout_proxy(
        "rules:\n  - {name: slow, match: {}, fault: {type: stall, after_events: 1, pause_ms: 50}}\n",
        on_exchange=seen.append,
    )
    proxied = chat(f"http://127.0.0.1:{closed_port()}/v1", proxy)
    assert type(proxied) is openai.APIConnectionError, proxied
    assert until(lambda: len(seen) == 1)
    assert (seen[0].status, seen[0].error_type, [f.fault for f in seen[0].faults]) == (None, "connection", ["stall"])
